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
    """``x * Phi(x)``; ``approximate="tanh"`` uses the tanh formula, as torch does. Forward
    keeps ``Phi(x)`` (or the tanh) for backward, which would otherwise compute it again."""

    @staticmethod
    def forward(ctx, a, approximate="none"):
        ctx.approximate = approximate
        if approximate == "tanh":
            t = np.square(a, out=np.empty_like(a))   # tanh(sqrt(2/pi) (a + 0.044715 a^3)),
            t *= 0.044715                        # in place: the MLP's largest arrays
            t += 1
            t *= a
            t *= _SQRT_2_OVER_PI
            np.tanh(t, out=t)
            ctx.save_for_backward(a, t)
            out = t + 1
            out *= a
            out *= 0.5
            return out
        cdf = _normal_cdf(a)
        ctx.save_for_backward(a, cdf)
        return a * cdf

    @staticmethod
    def backward(ctx, grad):
        a, kept = ctx.saved_tensors
        if ctx.approximate == "tanh":   # 0.5 (1 + t) + 0.5 a (1 - t^2) d_inner, in place
            d_inner = np.square(a, out=np.empty_like(a))
            d_inner *= 3 * 0.044715 * _SQRT_2_OVER_PI
            d_inner += _SQRT_2_OVER_PI
            slope = np.square(kept, out=np.empty_like(kept))
            np.subtract(1, slope, out=slope)
            slope *= a
            slope *= d_inner
            slope += kept
            slope += 1
            slope *= 0.5
            slope *= grad
            return slope, None
        pdf = np.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)
        return grad * (kept + a * pdf), None


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _normal_cdf(a):
    return 0.5 * (1 + special.erf(a / math.sqrt(2)))
