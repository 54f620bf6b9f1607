"""minigrad: a NumPy tensor autograd that mirrors torch's API, parameter names and numbers."""
import numpy as np

from . import functional, nn, optim, random
from .autograd import GradientShapeError
from .function import Context, Function, ShapeError
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .random import get_rng_state, manual_seed, set_rng_state
from .tensor import (RemovableHandle, Tensor, arange, float32, float64, int64, ones, ones_like,
                     tensor, zeros, zeros_like)
from .functional import cat, concatenate, stack


def randn(*shape, dtype=np.float32, requires_grad=False):
    """Standard-normal samples from minigrad's generator (``minigrad.manual_seed``)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    data = random.generator().standard_normal(shape).astype(dtype)
    return Tensor(data, requires_grad=requires_grad)


def rand(*shape, dtype=np.float32, requires_grad=False):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    data = random.generator().random(shape).astype(dtype)
    return Tensor(data, requires_grad=requires_grad)


__all__ = [
    "Tensor", "tensor", "Function", "Context", "GradientShapeError", "ShapeError", "no_grad",
    "enable_grad", "set_grad_enabled", "is_grad_enabled", "zeros", "ones", "zeros_like",
    "ones_like", "arange", "randn", "rand", "cat", "concatenate", "stack", "manual_seed",
    "get_rng_state", "set_rng_state", "float32", "float64", "int64", "nn", "optim", "functional",
    "RemovableHandle",
]
