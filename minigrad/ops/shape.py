"""Ops that move or copy elements: reshape, permute, expand, getitem, gather, concatenate, stack,
cast, clone."""
import numpy as np

from ..function import Function
from .broadcast import unbroadcast


class Reshape(Function):
    @staticmethod
    def forward(ctx, a, shape):
        ctx.input_shape = a.shape
        return a.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx.input_shape), None


class Permute(Function):
    @staticmethod
    def forward(ctx, a, axes):
        ctx.axes = tuple(axis % a.ndim for axis in axes)  # backward inverts it with argsort
        return np.transpose(a, ctx.axes)

    @staticmethod
    def backward(ctx, grad):
        return np.transpose(grad, np.argsort(ctx.axes)), None


class Expand(Function):
    """Broadcast to a larger shape (torch's ``expand``); backward sums the copies."""

    @staticmethod
    def forward(ctx, a, shape):
        ctx.input_shape = a.shape
        return np.broadcast_to(a, shape)

    @staticmethod
    def backward(ctx, grad):
        return unbroadcast(grad, ctx.input_shape), None


class GetItem(Function):
    """Basic and advanced indexing; repeated integer indices add up their gradients."""

    @staticmethod
    def forward(ctx, a, index):
        ctx.input_shape, ctx.index = a.shape, index
        ctx.dtype = a.dtype
        return np.array(a[index], copy=True)

    @staticmethod
    def backward(ctx, grad):
        full = np.zeros(ctx.input_shape, dtype=ctx.dtype)
        if _is_basic(ctx.index):
            full[ctx.index] = grad
        else:
            np.add.at(full, ctx.index, grad)
        return full, None


def _is_basic(index):
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, (int, np.integer, slice)) for p in parts)


class Gather(Function):
    """``torch.gather``: ``out[i][j] = a[i][index[i][j]]`` along ``dim``; repeats add up in
    backward."""

    @staticmethod
    def forward(ctx, a, dim, index):
        ctx.input_shape, ctx.coords = a.shape, _gather_coords(index, dim)
        return a[ctx.coords]

    @staticmethod
    def backward(ctx, grad):
        full = np.zeros(ctx.input_shape, dtype=grad.dtype)
        np.add.at(full, ctx.coords, grad)
        return full, None, None


def _gather_coords(index, dim):
    """The advanced index that picks ``a[i][index[i][j]][k]`` (``dim`` = 1) for every position."""
    coords = list(np.indices(index.shape, sparse=True))
    coords[dim] = index
    return tuple(coords)


class Concatenate(Function):
    """``Concatenate.apply(axis, *tensors)``."""

    @staticmethod
    def forward(ctx, axis, *arrays):
        ctx.axis = axis
        ctx.splits = np.cumsum([x.shape[axis] for x in arrays])[:-1]
        return np.concatenate(arrays, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        return (None, *np.split(grad, ctx.splits, axis=ctx.axis))


class Stack(Function):
    """``Stack.apply(axis, *tensors)``."""

    @staticmethod
    def forward(ctx, axis, *arrays):
        ctx.axis, ctx.count = axis, len(arrays)
        return np.stack(arrays, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        parts = np.split(grad, ctx.count, axis=ctx.axis)
        return (None, *(np.squeeze(p, axis=ctx.axis) for p in parts))


class Cast(Function):
    """Change the dtype; the gradient goes back in the input's dtype."""

    @staticmethod
    def forward(ctx, a, dtype):
        ctx.dtype = a.dtype
        return a.astype(dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad.astype(ctx.dtype), None


class Clone(Function):
    @staticmethod
    def forward(ctx, a):
        return a.copy()

    @staticmethod
    def backward(ctx, grad):
        return grad
