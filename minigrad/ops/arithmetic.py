"""Elementwise arithmetic: add, sub, mul, div, neg, pow, exp, log, sqrt, abs, clip."""
import numpy as np

from ..function import Function
from .broadcast import unbroadcast


class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (np.shape(a), np.shape(b))
        return a + b

    @staticmethod
    def backward(ctx, grad):
        shape_a, shape_b = ctx.shapes
        grad_a = unbroadcast(grad, shape_a) if ctx.needs_input_grad[0] else None
        grad_b = unbroadcast(grad, shape_b) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (np.shape(a), np.shape(b))
        return a - b

    @staticmethod
    def backward(ctx, grad):
        shape_a, shape_b = ctx.shapes
        grad_a = unbroadcast(grad, shape_a) if ctx.needs_input_grad[0] else None
        grad_b = unbroadcast(-grad, shape_b) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad_a = unbroadcast(grad * b, np.shape(a)) if ctx.needs_input_grad[0] else None
        grad_b = unbroadcast(grad * a, np.shape(b)) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a / b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad_a = unbroadcast(grad / b, np.shape(a)) if ctx.needs_input_grad[0] else None
        grad_b = unbroadcast(-grad * a / (b * b), np.shape(b)) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class Neg(Function):
    @staticmethod
    def forward(ctx, a):
        return -a

    @staticmethod
    def backward(ctx, grad):
        return -grad


class Pow(Function):
    @staticmethod
    def forward(ctx, a, b):
        out = a ** b
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        """As torch: 0 where the exponent is 0 (for a) or where ``a == 0 <= b`` (for b)."""
        a, b, out = ctx.saved_tensors
        grad_a = grad_b = None
        with np.errstate(divide="ignore", invalid="ignore"):
            if ctx.needs_input_grad[0]:
                grad_a = unbroadcast(np.where(b == 0, 0, grad * b * a ** (b - 1)), np.shape(a))
            if ctx.needs_input_grad[1]:
                d_b = np.where((a == 0) & (b >= 0), 0, out * np.log(a))
                grad_b = unbroadcast(grad * d_b, np.shape(b))
        return grad_a, grad_b


class Exp(Function):
    @staticmethod
    def forward(ctx, a):
        out = np.exp(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out


class Log(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.log(a)

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return grad / a


class Sqrt(Function):
    @staticmethod
    def forward(ctx, a):
        out = np.sqrt(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad / (2 * out)


class Abs(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.abs(a)

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return grad * np.sign(a)


class Clip(Function):
    """``clamp(a, low, high)``; the gradient passes where ``low <= a <= high``, as in torch."""

    @staticmethod
    def forward(ctx, a, low, high):
        if a.dtype.kind == "f":  # a float64 bound must not upcast a float32 tensor
            low, high = (None if b is None else np.asarray(b, dtype=a.dtype) for b in (low, high))
        ctx.save_for_backward(a)
        ctx.bounds = (low, high)
        return np.clip(a, low, high)

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        low, high = ctx.bounds
        inside = np.ones(a.shape, dtype=bool)
        if low is not None:
            inside &= a >= low
        if high is not None:
            inside &= a <= high
        return grad * inside, None, None
