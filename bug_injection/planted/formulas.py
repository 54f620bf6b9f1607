"""Wrong gradient formulas, each written once in NumPy and run on either framework.

Each is ``spoil(inputs, grad, right) -> wrong_gradient``: ``inputs`` are the op's arguments in
minigrad's order (arrays and options), ``grad`` is d loss / d output and ``right`` the gradient
the formula spoils. ``functions.spoiled_function`` and ``functions.spoiled_backward`` run them;
``gradient.py`` plants the catalogue's, the gradient-check tests build their models from the
rest. Each reads what it needs from ``inputs`` (not from what an op's forward chose to save),
so it holds whatever the op keeps internally.
"""
import numpy as np
from scipy import special

from minigrad.ops import conv


# ------------------------------------------------------------- the catalogue's
def input_with_weight_transposed(inputs, grad, right):
    """Linear: the input gradient uses W.T where W belongs."""
    weight = inputs[1]
    return grad @ weight.T                      # right: grad @ weight


def transposed(inputs, grad, right):
    return right.T


def sign_flipped(inputs, grad, right):
    return -right


def doubled(inputs, grad, right):
    return 2 * right


def tripled(inputs, grad, right):
    return 3 * right


def halved(inputs, grad, right):
    return right / 2


def bias_mean(inputs, grad, right):
    """Linear: the bias gradient is the mean over the batch where the forward sums."""
    return grad.reshape(-1, grad.shape[-1]).mean(axis=0)     # right: .sum(axis=0)


def mask_dropped(inputs, grad, right):
    """ReLU: the gradient passes where the unit was off."""
    return grad                                 # right: grad * (x > 0)


def sigmoid_without_one_minus(inputs, grad, right):
    out = special.expit(inputs[0])
    return grad * out                           # right: grad * out * (1 - out)


def tanh_without_square(inputs, grad, right):
    out = np.tanh(inputs[0])
    return grad * (1 - out)                     # right: grad * (1 - out * out)


def conv_input_unflipped(inputs, grad, right):
    """The input gradient as a full correlation of the output gradient with the kernel as it
    is, where the flipped kernel belongs: each output position sends ``grad * w[i, j]`` back to
    input position ``+ (kh - 1 - i, kw - 1 - j)`` instead of ``+ (i, j)``."""
    x, weight = inputs[0], inputs[1]
    (sh, sw), (ph, pw) = conv.pair(inputs[3], "stride", minimum=1), conv.pair(
        inputs[4], "padding", minimum=0)
    kh, kw = weight.shape[2:]
    out_h, out_w = grad.shape[2:]
    padded = np.zeros((x.shape[0], x.shape[1], x.shape[2] + 2 * ph, x.shape[3] + 2 * pw),
                      dtype=grad.dtype)
    for i in range(kh):
        for j in range(kw):
            rows = slice(kh - 1 - i, kh - 1 - i + sh * out_h, sh)
            columns = slice(kw - 1 - j, kw - 1 - j + sw * out_w, sw)
            padded[:, :, rows, columns] += np.einsum("nohw,oc->nchw", grad, weight[:, :, i, j])
    return padded[:, :, ph:ph + x.shape[2], pw:pw + x.shape[3]]


def times_batch_size(inputs, grad, right):
    return right * inputs[0].shape[0]           # right: (softmax - onehot) * grad / N


def first_slice(inputs, grad, right):
    """The broadcast operand's gradient not summed over the axes it was broadcast along: the
    first slice is kept instead, so the shape fits and no engine complains."""
    shape = np.shape(inputs[1])
    kept = grad[(0,) * (grad.ndim - len(shape))]
    stretched = tuple(slice(0, 1) if n == 1 else slice(None) for n in shape)
    return kept[stretched]


def layer_norm_mean_dropped(inputs, grad, right):
    """Adds back ``invstd * mean(grad * weight)``, the term the right formula subtracts."""
    x, normalized_shape, weight, _, eps = inputs
    count = 1 if np.isscalar(normalized_shape) else len(normalized_shape)
    axes = tuple(range(x.ndim - count, x.ndim))
    invstd = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    grad_x_hat = grad if weight is None else grad * weight
    return right + invstd * grad_x_hat.mean(axis=axes, keepdims=True)


def batch_norm_mean_dropped(inputs, grad, right):
    """Adds back ``invstd * weight * mean(grad)`` per channel (batch statistics only)."""
    x, running_mean, running_var, weight, _, training, _, eps = inputs
    if not (training or running_mean is None or running_var is None):
        return right    # running statistics: there is no mean term to drop
    axes = (0,) + tuple(range(2, x.ndim))
    stat_shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    scale = 1.0 / np.sqrt(x.var(axis=axes).reshape(stat_shape) + eps)
    if weight is not None:
        scale = scale * weight.reshape(stat_shape)
    return right + scale * grad.mean(axis=axes, keepdims=True)


# ------------------------------------------------- more, for the gradient-check tests
def last_row_zeroed(inputs, grad, right):
    """One row of a weight's gradient lost (an off-by-one in a hand-written loop)."""
    wrong = np.array(right, copy=True)
    wrong[-1] = 0
    return wrong


def tanh_plus_square(inputs, grad, right):
    out = np.tanh(inputs[0])
    return grad * (1 + out * out)               # right: grad * (1 - out * out)


def layer_norm_terms_dropped(inputs, grad, right):
    """LayerNorm's input gradient without its mean and variance terms: ``invstd * grad * w``."""
    x, normalized_shape, weight, _, eps = inputs
    count = 1 if np.isscalar(normalized_shape) else len(normalized_shape)
    axes = tuple(range(x.ndim - count, x.ndim))
    invstd = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return invstd * (grad if weight is None else grad * weight)


def mask_half_kept(inputs, grad, right):
    """ReLU: half the gradient passes where the unit was off (a leaky slope in backward only)."""
    x = inputs[0]
    return grad * (x > 0) + 0.5 * grad * (x <= 0)      # right: grad * (x > 0)
