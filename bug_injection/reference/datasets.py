"""Small synthetic data sets for the reference models: clean, normalized, balanced, no leakage.

Each comes as NumPy arrays (float32 inputs; int64 class labels or float32 regression targets);
a ``Bench`` turns them into the backend's tensors. Generated from a private seeded generator,
so every call with the same seed gives the same arrays.
"""
from dataclasses import dataclass

import numpy as np

CLASSES = 4
FEATURES = 6


@dataclass(frozen=True)
class DataSet:
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray


def blobs(*, seed=0, train=1600, test=200):
    """``CLASSES`` Gaussian clusters in ``FEATURES`` dimensions, standardized on the train set."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 1.5, (CLASSES, FEATURES))
    labels = _balanced_labels(rng, train + test)
    x = centers[labels] + rng.normal(0.0, 1.0, (train + test, FEATURES))
    return _split(_standardized(x, train), labels, train)


def images(*, seed=0, train=128, test=64):
    """1x6x6 images: one random template per class plus noise, standardized on the training set."""
    rng = np.random.default_rng(seed)
    templates = rng.normal(0.0, 1.0, (CLASSES, 1, 6, 6))
    labels = _balanced_labels(rng, train + test)
    x = templates[labels] + rng.normal(0.0, 0.5, (train + test, 1, 6, 6))
    return _split(_standardized(x, train), labels, train)


def regression(*, seed=0, train=128, test=64):
    """``y = tanh(x @ w)`` plus a little noise, one target column: targets of shape (N, 1)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 1.0, (train + test, FEATURES))
    w = rng.normal(0.0, 1.0 / np.sqrt(FEATURES), (FEATURES, 1))
    y = np.tanh(x @ w) + rng.normal(0.0, 0.05, (train + test, 1))
    return _split(x, y.astype(np.float32), train)


def _balanced_labels(rng, count):
    return rng.permutation(np.arange(count) % CLASSES).astype(np.int64)


def _standardized(x, train):
    mean = x[:train].mean(axis=0)
    std = x[:train].std(axis=0)
    return (x - mean) / std


def _split(x, y, train):
    x = x.astype(np.float32)
    return DataSet(x[:train], y[:train], x[train:], y[train:])


def zen_text(*, seed=0, length=16, test=8):
    """The Zen of Python as padded next-character windows (``text.sequences``), shuffled by
    ``seed`` so that every run of four rows holds a line end with its padding (while they
    last), as a batch of padded lines does; the last ``test`` windows are the test set."""
    from .text import IGNORE_INDEX, sequences

    x, y = sequences(length=length)
    rng = np.random.default_rng(seed)
    padded = (y == IGNORE_INDEX).any(axis=1)
    ends, middles = rng.permutation(np.flatnonzero(padded)), rng.permutation(
        np.flatnonzero(~padded))
    order = []
    while len(ends) or len(middles):
        order += list(ends[:1]) + list(middles[:3])
        ends, middles = ends[1:], middles[3:]
    x, y = x[order], y[order]
    return DataSet(x[:-test], y[:-test], x[-test:], y[-test:])


def zen_text_8(*, seed=0):
    """``zen_text`` in windows of 8 characters (the hunt's tiny GPT)."""
    return zen_text(seed=seed, length=8)
