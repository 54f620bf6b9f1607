"""scikit-learn's digits (1797 8x8 grey images, 10 classes, shipped inside the package),
split and standardised, as NumPy arrays and as torch tensors."""
from dataclasses import dataclass

import numpy as np

CLASSES = 10


@dataclass(frozen=True)
class Split:
    """Standardised features (float64, ``N x 64``) and int64 labels."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_raw():
    """Pixel values 0..16 as float64 ``(1797, 64)`` and int64 labels."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return x.astype(np.float64), y.astype(np.int64)


def load_split(*, test_fraction=0.25, seed=0, rows=None):
    """A shuffled train/test split, standardised with the training set's statistics;
    ``rows`` limits the examples used (before splitting)."""
    x, y = load_raw()
    order = np.random.default_rng(seed).permutation(len(x))[:rows]
    cut = int(round(len(order) * (1 - test_fraction)))
    train, test = order[:cut], order[cut:]
    mean, std = x[train].mean(0), x[train].std(0)
    std[std == 0] = 1.0
    return Split((x[train] - mean) / std, y[train], (x[test] - mean) / std, y[test])


def as_torch(x, y, *, dtype=None):
    """``(float tensor, int64 tensor)`` from NumPy features and labels (float32 by default)."""
    import torch

    return (torch.tensor(x, dtype=dtype or torch.float32), torch.tensor(y, dtype=torch.int64))


def as_images(x):
    """``N x 64`` rows as ``N x 1 x 8 x 8`` images."""
    return x.reshape(len(x), 1, 8, 8)
