"""Hypothesis strategies for shapes and arrays, shared by the test suite.

Shapes, dims and options are drawn by hypothesis; array values come from a NumPy generator
seeded by a drawn integer, so they are continuous (no accidental ties) and reproducible.
``spaced_arrays`` keeps values apart from each other and from zero, so that functions with
kinks (relu, abs, max) are smooth within a finite-difference step of every drawn point.
"""
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

MAX_SIDE = 4


def shapes(*, min_dims=0, max_dims=3, min_side=1, max_side=MAX_SIDE):
    """Array shapes, scalars (``()``) included when ``min_dims`` is 0."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def broadcastable_shapes(*, num_shapes=2, min_dims=0, max_dims=3, max_side=MAX_SIDE):
    """A tuple of ``num_shapes`` shapes that NumPy (and torch) broadcast together."""
    return hnp.mutually_broadcastable_shapes(
        num_shapes=num_shapes, min_dims=min_dims, max_dims=max_dims, min_side=1,
        max_side=max_side).map(lambda result: result.input_shapes)


def dims(ndim):
    """A valid dim of an ``ndim``-d array, negative spellings included (None for a 0-d array)."""
    if ndim == 0:
        return st.none()
    return st.integers(-ndim, ndim - 1)


def generators():
    """Seeded ``numpy.random.Generator`` objects (hypothesis shrinks the seed)."""
    return st.integers(0, 2**32 - 1).map(np.random.default_rng)


def arrays(shape, *, low=-2.0, high=2.0):
    """float64 arrays of ``shape`` with values uniform in [low, high]."""
    return generators().map(lambda rng: rng.uniform(low, high, size=shape))


def positive_arrays(shape, *, low=0.5, high=2.0):
    """float64 arrays with values in [low, high], ``low > 0``: inputs of log, sqrt, division."""
    return arrays(shape, low=low, high=high)


def spaced_arrays(shape, *, scale=2.0):
    """float64 arrays in [-scale, scale] whose values are distinct and not near zero.

    Values lie on a jittered grid of step ``scale / (2 n)`` (n = size): any two differ by at
    least half a step and every one is at least half a step from 0, far beyond a
    finite-difference step, so relu, abs, max and min are smooth around every drawn point.
    """
    size = int(np.prod(shape, dtype=np.int64))
    step = scale / (2 * max(size, 1))

    def build(rng):
        slots = np.concatenate([np.arange(-2 * size, 0), np.arange(1, 2 * size + 1)])
        chosen = rng.choice(slots, size=size, replace=False)
        return ((chosen + rng.uniform(-0.25, 0.25, size=size)) * step).reshape(shape)

    return generators().map(build)


def class_indices(shape, classes):
    """int64 arrays of ``shape`` with values in ``[0, classes)``."""
    return generators().map(lambda rng: rng.integers(0, classes, size=shape, dtype=np.int64))


def probabilities(shape, *, axis=-1):
    """float64 arrays whose entries are positive and sum to 1 along ``axis``."""
    def build(rng):
        weights = rng.uniform(0.1, 1.0, size=shape)
        return weights / weights.sum(axis=axis, keepdims=True)

    return generators().map(build)
