"""Functions over Tensors, like ``torch.nn.functional``; each calls one op's ``Function.apply``."""
from .ops import activation, arithmetic, linalg, loss, shape, softmax as softmax_ops
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


def softmax(x, dim):
    return softmax_ops.Softmax.apply(x, dim)


def log_softmax(x, dim):
    return softmax_ops.LogSoftmax.apply(x, dim)


def cross_entropy(input, target, *, reduction="mean"):
    """Log-softmax + NLL; ``target`` is int64 class indices or float class probabilities."""
    return loss.CrossEntropy.apply(input, target, reduction)


def mse_loss(input, target, *, reduction="mean"):
    return loss.MSELoss.apply(input, target, reduction)


def binary_cross_entropy_with_logits(input, target, *, reduction="mean"):
    return loss.BCEWithLogits.apply(input, target, reduction)


__all__ = ["linear", "relu", "leaky_relu", "sigmoid", "tanh", "gelu", "clip", "clamp", "cat",
           "concatenate", "stack", "matmul", "Tensor", "softmax", "log_softmax",
           "cross_entropy", "mse_loss", "binary_cross_entropy_with_logits"]
