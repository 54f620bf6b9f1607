"""Functions over Tensors, like ``torch.nn.functional``; each calls one op's ``Function.apply``."""
from .ops import activation, arithmetic, linalg, loss, shape, softmax as softmax_ops
from .ops import attention, conv, dropout as dropout_ops, embedding as embedding_ops
from .ops import normalization, pooling
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


def cross_entropy(input, target, *, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Log-softmax + NLL; ``target`` is int64 class indices or float class probabilities.

    Index targets equal to ``ignore_index`` are left out (of the mean's count too);
    ``label_smoothing`` mixes the targets with the uniform distribution, as in torch.
    """
    return loss.CrossEntropy.apply(input, target, reduction, ignore_index, label_smoothing)


def mse_loss(input, target, *, reduction="mean"):
    return loss.MSELoss.apply(input, target, reduction)


def binary_cross_entropy_with_logits(input, target, *, reduction="mean"):
    return loss.BCEWithLogits.apply(input, target, reduction)


def conv2d(input, weight, bias=None, stride=1, padding=0):
    return conv.Conv2d.apply(input, weight, bias, stride, padding)


def max_pool2d(input, kernel_size, stride=None, padding=0):
    return pooling.MaxPool2d.apply(input, kernel_size, stride, padding)


def dropout(input, p=0.5, training=True):
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return dropout_ops.Dropout.apply(input, p, training)


def embedding(input, weight):
    """Rows of ``weight`` picked by the integer tensor ``input``: shape ``input.shape + (D,)``."""
    return embedding_ops.Embedding.apply(input, weight)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """``softmax(query @ key.T * scale + mask) @ value`` as torch computes it (one op)."""
    if not 0 <= dropout_p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    return attention.ScaledDotProductAttention.apply(query, key, value, attn_mask, dropout_p,
                                                     is_causal, scale)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalize per channel (axis 1); in training, update the running buffers in place."""
    return normalization.BatchNorm.apply(input, running_mean, running_var, weight, bias,
                                         training, momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return normalization.LayerNorm.apply(input, normalized_shape, weight, bias, eps)


__all__ = ["linear", "relu", "leaky_relu", "sigmoid", "tanh", "gelu", "clip", "clamp", "cat",
           "concatenate", "stack", "matmul", "Tensor", "softmax", "log_softmax",
           "cross_entropy", "mse_loss", "binary_cross_entropy_with_logits", "conv2d",
           "max_pool2d", "dropout", "batch_norm", "layer_norm", "embedding",
           "scaled_dot_product_attention"]
