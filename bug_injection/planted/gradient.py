"""Gradient bugs: a backward formula with one mistake, planted in one module of a bench.

The wrong formulas live in ``formulas.py``, written once in NumPy. minigrad: the op's
``Function`` class gets the wrong ``backward`` (``patched_backward``): the right formula with
one gradient spoiled. For ops with weights the wrong formula is scoped to the target module by
a marker on its parameter, so the other layers of the same op stay right; parameter-free ops
(activations, the loss) are used once in their reference model. torch: the target module's
forward is swapped for one calling a ``torch.autograd.Function`` that runs torch's forward and
spoils torch's gradient with the same formula (``functions.spoiled_function``). Either way
everything is put back when the ``with`` block ends.
"""
import contextlib

from . import formulas
from .functions import minigrad_op, spoiled_backward, spoiled_function
from .patching import marked, patched_backward, swapped_forward

MARKER = "_gradhunt_planted"


# ------------------------------------------------------------------------ plants
def linear_input_transposed(bench, module):
    return _planted(bench, module, "linear", 0, formulas.input_with_weight_transposed,
                    _linear_forward)


def linear_weight_transposed(bench, module):
    return _planted(bench, module, "linear", 1, formulas.transposed, _linear_forward)


def linear_input_sign_flipped(bench, module):
    return _planted(bench, module, "linear", 0, formulas.sign_flipped, _linear_forward)


def linear_weight_scaled(bench, module):
    return _planted(bench, module, "linear", 1, formulas.doubled, _linear_forward)


def linear_bias_mean(bench, module):
    return _planted(bench, module, "linear", 2, formulas.bias_mean, _linear_forward)


def relu_mask_dropped(bench, module):
    return _planted(bench, module, "relu", 0, formulas.mask_dropped, _pointwise_forward,
                    scoped=False)


def sigmoid_derivative_wrong(bench, module):
    return _planted(bench, module, "sigmoid", 0, formulas.sigmoid_without_one_minus,
                    _pointwise_forward, scoped=False)


def tanh_derivative_wrong(bench, module):
    return _planted(bench, module, "tanh", 0, formulas.tanh_without_square, _pointwise_forward,
                    scoped=False)


def conv_kernel_not_flipped(bench, module):
    return _planted(bench, module, "conv2d", 0, formulas.conv_input_unflipped, _conv_forward)


def cross_entropy_not_divided(bench, module):
    """``module`` is "loss": the bench's loss function."""
    return _planted(bench, module, "cross_entropy", 0, formulas.times_batch_size, _loss_forward,
                    scoped=False)


def add_broadcast_not_reduced(bench, module):
    return _planted(bench, module, "add", 1, formulas.first_slice, _offset_forward,
                    parameter="offset")


def layer_norm_no_mean_term(bench, module):
    return _planted(bench, module, "layer_norm", 0, formulas.layer_norm_mean_dropped,
                    _layer_norm_forward)


def batch_norm_no_mean_term(bench, module):
    return _planted(bench, module, "batch_norm", 0, formulas.batch_norm_mean_dropped,
                    _batch_norm_forward)


# ------------------------------------------------------------------- machinery
@contextlib.contextmanager
def _planted(bench, module, kind, index, spoil, torch_forward, *, scoped=True,
             parameter="weight"):
    """Gradient ``index`` of op ``kind`` spoiled by ``spoil``. minigrad: the op's backward
    (scoped to ``module``'s ``parameter``); torch: ``module``'s forward -> ``torch_forward``
    calling the spoiled Function."""
    target = bench.loss_fn if module == "loss" else bench.module(module)
    with contextlib.ExitStack() as stack:
        if bench.backend == "minigrad":
            if scoped:
                stack.enter_context(marked(getattr(target, parameter), MARKER))
            stack.enter_context(patched_backward(minigrad_op(kind), spoiled_backward(
                index, spoil), marker=MARKER if scoped else None))
        else:
            function = spoiled_function("torch", kind, index, spoil)
            forward = torch_forward(function)
            forward.__qualname__ = f"forward calling {function.__name__}.apply"
            stack.enter_context(swapped_forward(target, forward))
        yield


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
        return function.apply(logits, target, self.reduction, self.ignore_index,
                              self.label_smoothing)
    return forward


def _offset_forward(function):
    def forward(self, x):
        return function.apply(x, self.offset)
    return forward


def _layer_norm_forward(function):
    def forward(self, x):
        return function.apply(x, self.normalized_shape, self.weight, self.bias, self.eps)
    return forward


def _batch_norm_forward(function):
    def forward(self, x):
        if not self.training:
            return type(self).forward(self, x)
        self.num_batches_tracked.add_(1)
        return function.apply(x, self.running_mean, self.running_var, self.weight, self.bias,
                              True, self.momentum, self.eps)
    return forward


__all__ = ["linear_input_transposed", "linear_weight_transposed", "linear_input_sign_flipped",
           "linear_weight_scaled", "linear_bias_mean", "relu_mask_dropped",
           "sigmoid_derivative_wrong", "tanh_derivative_wrong", "conv_kernel_not_flipped",
           "cross_entropy_not_divided", "add_broadcast_not_reduced", "layer_norm_no_mean_term",
           "batch_norm_no_mean_term", "MARKER"]
