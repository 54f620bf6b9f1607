"""Gradient bugs: a backward formula with one mistake, planted in one module of a bench.

minigrad: the op's ``Function`` class gets a wrong ``backward`` (``patched_backward``): the
right formula with one gradient spoiled. For ops with weights the wrong formula is scoped to
the target module by a marker on its parameter, so the other layers of the same op stay right;
parameter-free ops (activations, the loss) are used once in their reference model.
torch: the target module's forward is swapped for a buggy ``torch.autograd.Function`` (see
``torch_functions``). Either way everything is put back when the ``with`` block ends.
"""
import contextlib

import numpy as np
from scipy import special

from minigrad.ops import activation, arithmetic, conv, linalg, loss, normalization

from .patching import marked, patched_backward, swapped_forward

MARKER = "_gradhunt_planted"


# ------------------------------------------------------------------------ plants
def linear_input_transposed(bench, module):
    return _planted(bench, module, linalg.Linear, _spoil(0, _input_with_weight_transposed),
                    "LinearInputTransposed", _linear_forward)


def linear_weight_transposed(bench, module):
    return _planted(bench, module, linalg.Linear, _spoil(1, lambda ctx, grad, right: right.T),
                    "LinearWeightTransposed", _linear_forward)


def linear_input_sign_flipped(bench, module):
    return _planted(bench, module, linalg.Linear, _spoil(0, lambda ctx, grad, right: -right),
                    "LinearInputSignFlipped", _linear_forward)


def linear_weight_scaled(bench, module):
    return _planted(bench, module, linalg.Linear, _spoil(1, lambda ctx, grad, right: 2 * right),
                    "LinearWeightScaled", _linear_forward)


def linear_bias_mean(bench, module):
    return _planted(bench, module, linalg.Linear, _spoil(2, _bias_mean), "LinearBiasMean",
                    _linear_forward)


def relu_mask_dropped(bench, module):
    return _planted(bench, module, activation.ReLU, _spoil(0, lambda ctx, grad, right: grad),
                    "ReLUMaskDropped", _pointwise_forward, scoped=False)


def sigmoid_derivative_wrong(bench, module):
    return _planted(bench, module, activation.Sigmoid, _spoil(0, _sigmoid_without_one_minus),
                    "SigmoidDerivativeWrong", _pointwise_forward, scoped=False)


def tanh_derivative_wrong(bench, module):
    return _planted(bench, module, activation.Tanh, _spoil(0, _tanh_without_square),
                    "TanhDerivativeWrong", _pointwise_forward, scoped=False)


def conv_kernel_not_flipped(bench, module):
    return _planted(bench, module, conv.Conv2d, _spoil(0, _conv_input_unflipped),
                    "Conv2dKernelNotFlipped", _conv_forward)


def cross_entropy_not_divided(bench, module):
    """``module`` is "loss": the bench's loss function."""
    return _planted(bench, module, loss.CrossEntropy, _spoil(0, _times_batch_size),
                    "CrossEntropyNotDivided", _loss_forward, scoped=False)


def add_broadcast_not_reduced(bench, module):
    return _planted(bench, module, arithmetic.Add, _spoil(1, _first_slice),
                    "AddBroadcastNotReduced", _offset_forward, parameter="offset")


def layer_norm_no_mean_term(bench, module):
    return _planted(bench, module, normalization.LayerNorm, _spoil(0, _layer_norm_mean_dropped),
                    "LayerNormNoMeanTerm", _layer_norm_forward)


def batch_norm_no_mean_term(bench, module):
    return _planted(bench, module, normalization.BatchNorm, _spoil(0, _batch_norm_mean_dropped),
                    "BatchNormNoMeanTerm", _batch_norm_forward)


# ------------------------------------------------------------------- machinery
@contextlib.contextmanager
def _planted(bench, module, op, wrong, torch_function, torch_forward, *, scoped=True,
             parameter="weight"):
    """minigrad: ``op.backward`` -> ``wrong`` (scoped to ``module``'s ``parameter``);
    torch: ``module``'s forward -> ``torch_forward`` calling ``torch_function``."""
    target = bench.loss_fn if module == "loss" else bench.module(module)
    with contextlib.ExitStack() as stack:
        if bench.backend == "minigrad":
            if scoped:
                stack.enter_context(marked(getattr(target, parameter), MARKER))
            stack.enter_context(patched_backward(op, wrong, marker=MARKER if scoped else None))
        else:
            from . import torch_functions

            function = getattr(torch_functions, torch_function)
            forward = torch_forward(function)
            forward.__qualname__ = f"forward calling {torch_function}.apply"
            stack.enter_context(swapped_forward(target, forward))
        yield


def _spoil(index, spoil):
    """A wrong backward: the right one, with gradient ``index`` replaced by
    ``spoil(ctx, grad, right_gradient)`` (when that gradient is needed at all)."""
    def wrong(right, ctx, grad):
        grads = right(ctx, grad)
        grads = list(grads) if isinstance(grads, tuple) else [grads]
        if grads[index] is not None:
            grads[index] = spoil(ctx, grad, grads[index])
        return tuple(grads)
    return wrong


# -------------------------------------------------------- minigrad wrong formulas
# Each reads what it needs from ``ctx.inputs`` (the op's arguments, as ``apply`` got them), not
# from what the op's forward chose to save, so it holds whatever the op keeps internally.
def _input_with_weight_transposed(ctx, grad, right):
    weight = _array(ctx.inputs[1])
    return grad @ weight.T                      # right: grad @ weight


def _bias_mean(ctx, grad, right):
    return grad.reshape(-1, grad.shape[-1]).mean(axis=0)     # right: .sum(axis=0)


def _sigmoid_without_one_minus(ctx, grad, right):
    out = special.expit(_array(ctx.inputs[0]))
    return grad * out                           # right: grad * out * (1 - out)


def _tanh_without_square(ctx, grad, right):
    out = np.tanh(_array(ctx.inputs[0]))
    return grad * (1 - out)                     # right: grad * (1 - out * out)


def _conv_input_unflipped(ctx, grad, right):
    """The input gradient as a full correlation of the output gradient with the kernel as it
    is, where the flipped kernel belongs: each output position sends ``grad * w[i, j]`` back to
    input position ``+ (kh - 1 - i, kw - 1 - j)`` instead of ``+ (i, j)``."""
    x, weight = _array(ctx.inputs[0]), _array(ctx.inputs[1])
    (sh, sw), (ph, pw) = conv.pair(ctx.inputs[3], "stride", minimum=1), conv.pair(
        ctx.inputs[4], "padding", minimum=0)
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


def _times_batch_size(ctx, grad, right):
    return right * ctx.inputs[0].shape[0]       # right: (softmax - onehot) * grad / N


def _first_slice(ctx, grad, right):
    """The broadcast operand's gradient not summed over the axes it was broadcast along: the
    first slice is kept instead, so the shape fits and no engine complains."""
    shape = np.shape(_array(ctx.inputs[1]))
    kept = grad[(0,) * (grad.ndim - len(shape))]
    stretched = tuple(slice(0, 1) if n == 1 else slice(None) for n in shape)
    return kept[stretched]


def _layer_norm_mean_dropped(ctx, grad, right):
    """Adds back ``invstd * mean(grad * weight)``, the term the right formula subtracts."""
    x, normalized_shape, weight, _, eps = ctx.inputs
    x = _array(x)
    count = 1 if np.isscalar(normalized_shape) else len(normalized_shape)
    axes = tuple(range(x.ndim - count, x.ndim))
    invstd = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    grad_x_hat = grad if weight is None else grad * _array(weight)
    return right + invstd * grad_x_hat.mean(axis=axes, keepdims=True)


def _batch_norm_mean_dropped(ctx, grad, right):
    """Adds back ``invstd * weight * mean(grad)`` per channel (batch statistics only)."""
    x, running_mean, running_var, weight, _, training, _, eps = ctx.inputs
    if not (training or running_mean is None or running_var is None):
        return right    # running statistics: there is no mean term to drop
    x = _array(x)
    axes = (0,) + tuple(range(2, x.ndim))
    stat_shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    scale = 1.0 / np.sqrt(x.var(axis=axes).reshape(stat_shape) + eps)
    if weight is not None:
        scale = scale * _array(weight).reshape(stat_shape)
    return right + scale * grad.mean(axis=axes, keepdims=True)


def _array(value):
    """The ndarray of a minigrad Tensor (or the value itself)."""
    return getattr(value, "data", value)


# ------------------------------------------------------------ torch forwards
def _linear_forward(function):
    def forward(self, x):
        return function.apply(x, self.weight, self.bias)
    return forward


def _pointwise_forward(function):
    def forward(self, x):
        return function.apply(x)
    return forward


def _conv_forward(function):
    def forward(self, x):
        return function.apply(x, self.weight, self.bias, self.stride, self.padding)
    return forward


def _loss_forward(function):
    def forward(self, logits, target):
        return function.apply(logits, target)
    return forward


def _offset_forward(function):
    def forward(self, x):
        return function.apply(x, self.offset)
    return forward


def _layer_norm_forward(function):
    def forward(self, x):
        return function.apply(x, self.weight, self.bias, self.eps)
    return forward


def _batch_norm_forward(function):
    def forward(self, x):
        if not self.training:
            return type(self).forward(self, x)
        self.num_batches_tracked.add_(1)
        return function.apply(x, self.weight, self.bias, self.running_mean, self.running_var,
                              self.momentum, self.eps)
    return forward


__all__ = ["linear_input_transposed", "linear_weight_transposed", "linear_input_sign_flipped",
           "linear_weight_scaled", "linear_bias_mean", "relu_mask_dropped",
           "sigmoid_derivative_wrong", "tanh_derivative_wrong", "conv_kernel_not_flipped",
           "cross_entropy_not_divided", "add_broadcast_not_reduced", "layer_norm_no_mean_term",
           "batch_norm_no_mean_term", "MARKER"]
