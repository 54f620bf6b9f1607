"""Undo NumPy broadcasting in a backward pass."""
import numpy as np


def unbroadcast(grad, shape):
    """Sum ``grad`` over the axes that broadcasting added or stretched, giving ``shape``."""
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad.reshape(shape)


def expand_reduced(grad, shape, axis, keepdims):
    """Broadcast the gradient of a reduction over ``axis`` back to the input ``shape``."""
    if axis is not None and not keepdims:
        grad = np.expand_dims(grad, normalize_axes(axis, len(shape)))
    return np.broadcast_to(grad, shape)


def normalize_axes(axis, ndim):
    """``axis`` (None, int or tuple, negatives allowed) as a sorted tuple of non-negative ints."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if np.isscalar(axis) else tuple(axis)
    return tuple(sorted(a % ndim if ndim else 0 for a in axes))
