"""CIFAR-10 from its "python version" batches (``cifar-10-batches-py``: ``data_batch_1`` ...
``data_batch_5``, ``test_batch``), each a pickled dict with ``b"data"`` (N x 3072 uint8, the
red, green and blue 32x32 planes of each image in turn) and ``b"labels"`` (N ints 0..9)."""
import pickle
from pathlib import Path

import numpy as np

TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
FOLDER = "cifar-10-batches-py"
# per-channel mean and std of the 50,000 training images, on the 0..1 scale
MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32)
STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32)


def find_folder(path):
    """The folder holding the batches: ``path`` itself or its ``cifar-10-batches-py``."""
    path = Path(path)
    for folder in (path, path / FOLDER):
        if (folder / TEST_FILE).is_file() or (folder / TRAIN_FILES[0]).is_file():
            return folder
    raise FileNotFoundError(
        f"cifar10: no CIFAR-10 python batches ({TRAIN_FILES[0]} ... {TEST_FILE}) in {path} or "
        f"in {path / FOLDER}; download and unpack cifar-10-python.tar.gz there")


def read_batch(path):
    """``(images uint8 N x 3 x 32 x 32, labels int64 N)`` from one pickled batch file."""
    with open(path, "rb") as handle:
        batch = pickle.load(handle, encoding="bytes")
    data, labels = batch.get(b"data"), batch.get(b"labels")
    if data is None or labels is None:
        raise ValueError(f"{path}: not a CIFAR-10 batch (expected keys b'data' and b'labels', "
                         f"got {sorted(batch)})")
    data = np.asarray(data, dtype=np.uint8)
    labels = np.asarray(labels, dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(data) != len(labels):
        raise ValueError(f"{path}: expected data of shape (N, 3072) and N labels, got "
                         f"{data.shape} and {labels.shape}")
    return data.reshape(-1, 3, 32, 32), labels


def load(path, *, train=True, limit=None):
    """Images as float32 ``N x 3 x 32 x 32`` standardised per channel, labels int64.

    ``train`` picks the five training batches or the test batch (missing training batches are
    skipped as long as one is there); ``limit`` keeps the first ``limit`` images.
    """
    folder = find_folder(path)
    names = TRAIN_FILES if train else (TEST_FILE,)
    files = [folder / name for name in names if (folder / name).is_file()]
    if not files:
        raise FileNotFoundError(f"cifar10: none of {', '.join(names)} in {folder}")
    images, labels, count = [], [], 0
    for file in files:
        batch_images, batch_labels = read_batch(file)
        images.append(batch_images)
        labels.append(batch_labels)
        count += len(batch_labels)
        if limit is not None and count >= limit:
            break
    x = np.concatenate(images)[:limit].astype(np.float32) / 255.0
    x = (x - MEAN[:, None, None]) / STD[:, None, None]
    return x, np.concatenate(labels)[:limit]
