"""Data bugs: what is wrong with the data set before any model sees it.

Each plant swaps one or more of the bench's data tensors (``train_x``, ``train_y``, ``test_x``,
``test_y``) for a corrupted copy and puts the originals back when the block ends; the
originals are never written to.
"""
import contextlib

import numpy as np

from .patching import patched_attribute

RAW_SCALE, RAW_OFFSET = 1000.0, 500.0
NONFINITE_ROWS = (3, 17, 42)
LEAKED_ROWS = 12
RARE_CLASS, RARE_KEPT = 3, 30


def unnormalized_inputs(bench):
    """Inputs in raw units (times 1000, plus 500) instead of standardized."""
    return _replaced(bench, train_x=_raw(bench, bench.train_x), test_x=_raw(bench, bench.test_x))


def nonfinite_rows(bench):
    """A few training rows hold NaN or inf (a failed parse, a division by a zero std)."""
    x = bench.array(bench.train_x)
    x[NONFINITE_ROWS[0], 0] = np.nan
    x[NONFINITE_ROWS[1]] = np.nan
    x[NONFINITE_ROWS[2], -1] = np.inf
    return _replaced(bench, train_x=bench.tensor(x))


def train_test_duplicates(bench):
    """The first ``LEAKED_ROWS`` test examples are copies of training examples."""
    test_x, test_y = bench.array(bench.test_x), bench.array(bench.test_y)
    test_x[:LEAKED_ROWS] = bench.array(bench.train_x)[:LEAKED_ROWS]
    test_y[:LEAKED_ROWS] = bench.array(bench.train_y)[:LEAKED_ROWS]
    return _replaced(bench, test_x=bench.tensor(test_x), test_y=bench.tensor(test_y))


def label_imbalance(bench):
    """All but ``RARE_KEPT`` training examples of class ``RARE_CLASS`` dropped: the other
    classes outnumber it by more than 10:1."""
    y = bench.array(bench.train_y)
    rare = np.flatnonzero(y == RARE_CLASS)
    keep = np.setdiff1d(np.arange(len(y)), rare[RARE_KEPT:])
    return _replaced(bench, train_x=bench.tensor(bench.array(bench.train_x)[keep]),
                     train_y=bench.tensor(y[keep]))


def _raw(bench, x):
    return bench.tensor((bench.array(x) * RAW_SCALE + RAW_OFFSET).astype(np.float32))


@contextlib.contextmanager
def _replaced(bench, **tensors):
    with contextlib.ExitStack() as stack:
        for field, tensor in tensors.items():
            stack.enter_context(patched_attribute(bench, field, tensor))
        yield
