"""Matrix products: matmul (batched, with broadcasting) and linear (``x @ w.T + b``)."""
import numpy as np

from ..function import Function
from .broadcast import unbroadcast


class MatMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad_a = grad_b = None
        if b.ndim == 1:  # matrix @ vector: treat b as a column
            grad, b = grad[..., None], b[:, None]
        if a.ndim == 1:  # vector @ matrix: treat a as a row
            grad, a = grad[..., None, :], a[None, :]
        if ctx.needs_input_grad[0]:
            grad_a = unbroadcast(grad @ np.swapaxes(b, -1, -2), _restore(a, ctx.inputs[0]))
        if ctx.needs_input_grad[1]:
            grad_b = unbroadcast(np.swapaxes(a, -1, -2) @ grad, _restore(b, ctx.inputs[1]))
        grad_a = None if grad_a is None else grad_a.reshape(ctx.inputs[0].shape)
        grad_b = None if grad_b is None else grad_b.reshape(ctx.inputs[1].shape)
        return grad_a, grad_b


def _restore(expanded, original):
    """The shape to unbroadcast to: the 2-d view of a 1-d operand, else the operand's own."""
    return expanded.shape if original.ndim == 1 else original.shape


class Linear(Function):
    """``y = x @ weight.T + bias`` with ``weight`` of shape (out, in), like
    ``torch.nn.functional.linear``."""

    @staticmethod
    def forward(ctx, x, weight, bias=None):
        ctx.save_for_backward(x, weight)
        out = _rows_dot(x, weight.T)
        if bias is not None:
            out += bias
        return out

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x = _rows_dot(grad, weight) if ctx.needs_input_grad[0] else None
        grad_w = grad_b = None
        if ctx.needs_input_grad[1]:
            grad_w = np.dot(grad.reshape(-1, grad.shape[-1]).T, x.reshape(-1, x.shape[-1]))
        if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2]:
            grad_b = grad.reshape(-1, grad.shape[-1]).sum(axis=0)
        return (grad_x, grad_w, grad_b)[: len(ctx.inputs)]


def _rows_dot(x, matrix):
    """``x @ matrix`` over the last axis of ``x``, as one 2-d product: ``np.dot`` hands a
    transposed ``matrix`` to BLAS as it is, where ``@`` on a stack of rows may copy it."""
    if x.ndim <= 2:
        return np.dot(x, matrix)
    return np.dot(x.reshape(-1, x.shape[-1]), matrix).reshape(x.shape[:-1] + matrix.shape[1:])
