"""Softmax and log-softmax along one dim, stable: the max is subtracted before ``exp``."""
import numpy as np

from ..function import Function


class Softmax(Function):
    @staticmethod
    def forward(ctx, a, dim):
        shifted = a - a.max(axis=dim, keepdims=True)
        out = np.exp(shifted, out=shifted)
        out /= out.sum(axis=dim, keepdims=True)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return out * (grad - (grad * out).sum(axis=ctx.dim, keepdims=True)), None


class LogSoftmax(Function):
    @staticmethod
    def forward(ctx, a, dim):
        out = log_softmax_array(a, dim)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad - np.exp(out) * grad.sum(axis=ctx.dim, keepdims=True), None


def log_softmax_array(a, dim):
    """``a - logsumexp(a, dim)`` on an ndarray, computed from ``a - max`` so nothing overflows."""
    shifted = a - a.max(axis=dim, keepdims=True)
    shifted -= np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
    return shifted
