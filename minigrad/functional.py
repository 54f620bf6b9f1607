"""Functions over Tensors, like ``torch.nn.functional``; each calls one op's ``Function.apply``."""
from .ops import activation, arithmetic, linalg, shape
from .tensor import Tensor


def linear(x, weight, bias=None):
    return linalg.Linear.apply(x, weight, bias)


def relu(x):
    return activation.ReLU.apply(x)


def leaky_relu(x, negative_slope=0.01):
    return activation.LeakyReLU.apply(x, negative_slope)


def sigmoid(x):
    return activation.Sigmoid.apply(x)


def tanh(x):
    return activation.Tanh.apply(x)


def gelu(x, approximate="none"):
    return activation.GELU.apply(x, approximate)


def clip(x, min=None, max=None):
    return arithmetic.Clip.apply(x, min, max)


clamp = clip


def cat(tensors, dim=0):
    return shape.Concatenate.apply(dim, *tensors)


concatenate = cat


def stack(tensors, dim=0):
    return shape.Stack.apply(dim, *tensors)


def matmul(a, b):
    return linalg.MatMul.apply(a, b)


__all__ = ["linear", "relu", "leaky_relu", "sigmoid", "tanh", "gelu", "clip", "clamp", "cat",
           "concatenate", "stack", "matmul", "Tensor"]
