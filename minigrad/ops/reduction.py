"""Reductions over axes: sum, mean, max, min."""
import numpy as np

from ..function import Function
from .broadcast import expand_reduced, normalize_axes


class Sum(Function):
    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        ctx.args = (a.shape, axis, keepdims)
        return np.sum(a, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        shape, axis, keepdims = ctx.args
        return expand_reduced(grad, shape, axis, keepdims).copy(), None, None


class Mean(Function):
    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        ctx.args = (a.shape, axis, keepdims)
        return np.mean(a, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        shape, axis, keepdims = ctx.args
        count = int(np.prod([shape[i] for i in normalize_axes(axis, len(shape))]))
        return expand_reduced(grad, shape, axis, keepdims) / count, None, None


class _Extremum(Function):
    """max/min over axes; the gradient is shared evenly among tied extremes, as torch's amax."""

    reduce = None

    @classmethod
    def forward(cls, ctx, a, axis=None, keepdims=False):
        out = cls.reduce(a, axis=axis, keepdims=keepdims)
        ctx.save_for_backward(a, out)
        ctx.args = (axis, keepdims)
        return out

    @staticmethod
    def backward(ctx, grad):
        a, out = ctx.saved_tensors
        axis, keepdims = ctx.args
        hits = a == expand_reduced(out, a.shape, axis, keepdims)
        count = hits.sum(axis=axis, keepdims=True)
        share = expand_reduced(grad, a.shape, axis, keepdims) / np.broadcast_to(count, a.shape)
        return np.where(hits, share, 0).astype(a.dtype), None, None


class Max(_Extremum):
    reduce = staticmethod(np.max)


class Min(_Extremum):
    reduce = staticmethod(np.min)
