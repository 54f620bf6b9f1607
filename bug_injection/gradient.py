"""Gradient bugs: a backward formula with one mistake, planted in one module of a bench.

minigrad: the op's ``Function`` class gets a wrong ``backward`` (``patched_backward``): the
right formula with one gradient spoiled. For ops with weights the wrong formula is scoped to
the target module by a marker on its parameter, so the other layers of the same op stay right;
parameter-free ops (activations, the loss) are used once in their reference model.
torch: the target module's forward is swapped for a buggy ``torch.autograd.Function`` (see
``torch_functions``). Either way everything is put back when the ``with`` block ends.
"""
import contextlib


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
def _input_with_weight_transposed(ctx, grad, right):
    _, weight = ctx.saved_tensors
    return grad @ weight.T                      # right: grad @ weight


def _bias_mean(ctx, grad, right):
    return grad.reshape(-1, grad.shape[-1]).mean(axis=0)     # right: .sum(axis=0)


def _sigmoid_without_one_minus(ctx, grad, right):
    (out,) = ctx.saved_tensors
    return grad * out                           # right: grad * out * (1 - out)


def _tanh_without_square(ctx, grad, right):
    (out,) = ctx.saved_tensors
    return grad * (1 - out)                     # right: grad * (1 - out * out)


def _conv_input_unflipped(ctx, grad, right):
    """The input gradient computed with the kernel flipped once more: a full correlation of
    the output gradient with the kernel as it is, where the flipped kernel belongs."""
    _, weight = ctx.saved_tensors
    x_shape, padded_shape, stride, padding = ctx.geometry
    unflipped = weight[:, :, ::-1, ::-1]
    grad_rows = grad.transpose(1, 0, 2, 3).reshape(weight.shape[0], -1)
    grad_cols = unflipped.reshape(weight.shape[0], -1).T @ grad_rows
    grad_padded = conv.col2im(grad_cols, padded_shape, weight.shape[2:], stride, grad.shape[2:])
    return conv.unpad_spatial(grad_padded, padding, x_shape)


def _times_batch_size(ctx, grad, right):
    log_probs, _ = ctx.saved_tensors
    return right * log_probs.shape[0]           # right: (softmax - onehot) * grad / N


def _first_slice(ctx, grad, right):
    """The broadcast operand's gradient not summed over the axes it was broadcast along: the
    first slice is kept instead, so the shape fits and no engine complains."""
    shape = ctx.shapes[1]
    kept = grad[(0,) * (grad.ndim - len(shape))]
    stretched = tuple(slice(0, 1) if n == 1 else slice(None) for n in shape)
    return kept[stretched]


def _layer_norm_mean_dropped(ctx, grad, right):
    _, invstd, weight = ctx.saved_tensors
    grad_x_hat = grad if weight is None else grad * weight
    return right + invstd * grad_x_hat.mean(axis=ctx.axes, keepdims=True)


def _batch_norm_mean_dropped(ctx, grad, right):
    if not ctx.use_batch:
        return right    # running statistics: there is no mean term to drop
    _, invstd, weight = ctx.saved_tensors
    stat_shape = normalization.channel_shape(grad)
    scale = invstd if weight is None else invstd * weight.reshape(stat_shape)
    axes = (0,) + tuple(range(2, grad.ndim))
    return right + scale * grad.mean(axis=axes, keepdims=True)


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
