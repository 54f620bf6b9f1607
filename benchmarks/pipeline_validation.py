"""validate_data over a pipeline: 60,000 examples of 28x28 through a transform, on 2 threads.

Train: a Dataset of 60,000 uint8 28x28 images whose ``__getitem__`` converts to float, scales
by 1/255, flips at random and normalises (an MNIST-style transform), behind a shuffled
DataLoader (batch 64); test: 10,000 more through the same transform without the flip. Timed in
the same run: ``validate_data(train_loader, test=test_set)`` at its default budget, and one
plain pass over the training loader (what one epoch costs before any training). The last line
is validate_data's time in seconds (budget 10 s), with its ratio to one pass.

    python benchmarks/pipeline_validation.py
"""
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from diagnostics import validate_data

TRAIN, TEST, SIDE = 60_000, 10_000, 28


class Digits(Dataset):
    def __init__(self, images, labels, flip):
        self.images, self.labels, self.flip = images, labels, flip

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        x = torch.from_numpy(self.images[i]).float().div_(255.0).unsqueeze(0)
        if self.flip and torch.rand(()) < 0.5:
            x = x.flip(-1)
        return (x - 0.1307) / 0.3081, int(self.labels[i])


def _data():
    rng = np.random.default_rng(0)
    images = (rng.random((TRAIN + TEST, SIDE, SIDE)) ** 4 * 255).astype(np.uint8)
    labels = rng.integers(0, 10, TRAIN + TEST)
    train = Digits(images[:TRAIN], labels[:TRAIN], flip=True)
    test = Digits(images[TRAIN:], labels[TRAIN:], flip=False)
    return DataLoader(train, batch_size=64, shuffle=True), test


def _best_of(function, repeats):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def _one_pass(loader):
    return sum(len(x) for x, _ in loader)


def main():
    torch.set_num_threads(2)
    loader, test = _data()
    validation, report = _best_of(lambda: validate_data(loader, test=test), repeats=3)
    epoch, seen = _best_of(lambda: _one_pass(loader), repeats=1)
    assert seen == TRAIN and report.passed, str(report)
    print(f"validate_data over a DataLoader of {TRAIN:,} + a Dataset of {TEST:,} examples of "
          f"{SIDE}x{SIDE} ({report.counts['train_examples_read']} + "
          f"{report.counts['test_examples_read']} read): {validation:.2f} s; "
          f"one plain pass over the loader {epoch:.2f} s")
    print(f"pipeline validation: {validation:.2f} s (budget 10 s), "
          f"{validation / epoch:.2f} of one pass over the training loader")


if __name__ == "__main__":
    main()
