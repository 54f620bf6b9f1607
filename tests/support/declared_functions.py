"""Custom autograd Functions whose backward is on purpose not the forward's derivative (a
gradient reversal, a straight-through rounding), on torch and minigrad: what a user declares to
check_gradients so that it does not report them as mismatches."""
import numpy as np
import torch

import minigrad
from tests.diagnostics.tools_helpers import NN


class _Reverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -grad


class _RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class _MgReverse(minigrad.Function):
    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, grad):
        return -grad


class _MgRoundSTE(minigrad.Function):
    @staticmethod
    def forward(ctx, x):
        return np.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


REVERSE = {"torch": _Reverse, "minigrad": _MgReverse}
ROUND = {"torch": _RoundSTE, "minigrad": _MgRoundSTE}


def applying(framework, function):
    """A module whose forward is ``function.apply``: the declared exception as a layer."""
    class Apply(NN[framework].Module):
        def forward(self, x):
            return function.apply(x)
    return Apply()
