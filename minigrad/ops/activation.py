"""Pointwise nonlinearities: relu, leaky_relu, sigmoid, tanh, gelu."""
import math

import numpy as np
from scipy import special

from ..function import Function


class ReLU(Function):
    @staticmethod
    def forward(ctx, a):
        out = np.maximum(a, 0)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (out > 0)


class LeakyReLU(Function):
    @staticmethod
    def forward(ctx, a, negative_slope=0.01):
        ctx.save_for_backward(a)
        ctx.negative_slope = negative_slope
        return np.where(a > 0, a, a * negative_slope)

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return np.where(a > 0, grad, grad * ctx.negative_slope), None


class Sigmoid(Function):
    @staticmethod
    def forward(ctx, a):
        out = special.expit(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out * (1 - out)


class Tanh(Function):
    @staticmethod
    def forward(ctx, a):
        out = np.tanh(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (1 - out * out)


class GELU(Function):
    """``x * Phi(x)``; ``approximate="tanh"`` uses the tanh formula, as torch does."""

    @staticmethod
    def forward(ctx, a, approximate="none"):
        ctx.save_for_backward(a)
        ctx.approximate = approximate
        if approximate == "tanh":
            inner = _SQRT_2_OVER_PI * (a + 0.044715 * a**3)
            return 0.5 * a * (1 + np.tanh(inner))
        return a * _normal_cdf(a)

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        if ctx.approximate == "tanh":
            inner = _SQRT_2_OVER_PI * (a + 0.044715 * a**3)
            t = np.tanh(inner)
            d_inner = _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * a**2)
            return grad * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * d_inner), None
        pdf = np.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)
        return grad * (_normal_cdf(a) + a * pdf), None


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _normal_cdf(a):
    return 0.5 * (1 + special.erf(a / math.sqrt(2)))
