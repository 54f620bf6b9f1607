"""Inverted dropout: zero each element with probability p, scale the rest by 1 / (1 - p)."""
from .. import random
from ..function import Function


class Dropout(Function):
    """The identity when not training or ``p == 0``; else a mask from minigrad's generator."""

    @staticmethod
    def forward(ctx, a, p, training):
        if not training or p == 0:
            ctx.mask = None
            return a
        keep = random.generator().random(a.shape) >= p
        scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
        ctx.mask = keep.astype(a.dtype) * a.dtype.type(scale)
        return a * ctx.mask

    @staticmethod
    def backward(ctx, grad):
        grad_a = grad if ctx.mask is None else grad * ctx.mask
        return grad_a, None, None
