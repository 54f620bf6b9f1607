"""A wrong backward, written once in NumPy, run as a minigrad Function or a torch Function.

Two forms of wrong backward exist in the catalogue:

- ``wrong(inputs, grad) -> grads``: the whole backward written out (the attention-era bugs of
  ``transformer.py``), wrapped by ``planted_function``;
- ``spoil(inputs, grad, right) -> wrong_gradient``: the op's right gradient number ``index``
  replaced by a wrong one (the classic bugs of ``gradient.py`` and ``spoils.py``), wrapped by
  ``spoiled_function`` or, patched into minigrad's own op, by ``spoiled_backward``.

``inputs`` are the op's arguments as minigrad's op takes them (arrays for tensors, options as
given), ``grad`` is d loss / d output as an array. On minigrad the Function is the op with its
backward replaced; on torch it is a ``torch.autograd.Function`` running torch's forward for the
same arguments; its right gradients come from torch's autograd on the saved inputs.
"""
import numpy as np

import minigrad
from minigrad import Tensor
from minigrad.ops import (activation, arithmetic, attention, conv, embedding, linalg, loss,
                          normalization, pooling)


class MeanSquaredError(minigrad.Function):
    """``mean((output - target) ** 2)`` as one op (minigrad composes it from several)."""

    @staticmethod
    def forward(ctx, output, target):
        ctx.save_for_backward(output - target)
        return np.mean((output - target) ** 2)

    @staticmethod
    def backward(ctx, grad):
        (diff,) = ctx.saved_tensors
        grad_output = grad * 2.0 * diff / diff.size
        return grad_output, -grad_output


_OPS = {   # kind -> (the minigrad op, torch's forward for the same arguments)
    "linear": (linalg.Linear, lambda F, x, weight, bias: F.linear(x, weight, bias)),
    "relu": (activation.ReLU, lambda F, x: F.relu(x)),
    "sigmoid": (activation.Sigmoid, lambda F, x: x.sigmoid()),
    "tanh": (activation.Tanh, lambda F, x: x.tanh()),
    "add": (arithmetic.Add, lambda F, a, b: a + b),
    "conv2d": (conv.Conv2d, lambda F, x, weight, bias, stride, padding: F.conv2d(
        x, weight, bias, stride, padding)),
    "max_pool2d": (pooling.MaxPool2d, lambda F, x, kernel, stride, padding: F.max_pool2d(
        x, kernel, stride, padding)),
    "layer_norm": (normalization.LayerNorm, lambda F, x, shape, weight, bias, eps: F.layer_norm(
        x, (shape,) if np.isscalar(shape) else tuple(shape), weight, bias, eps)),
    "batch_norm": (normalization.BatchNorm,
                   lambda F, x, mean, var, weight, bias, training, momentum, eps: F.batch_norm(
                       x, mean, var, weight, bias, training, momentum, eps)),
    "cross_entropy": (loss.CrossEntropy,
                      lambda F, logits, target, reduction="mean", ignore_index=-100,
                      smoothing=0.0: F.cross_entropy(logits, target, reduction=reduction,
                                                     ignore_index=ignore_index,
                                                     label_smoothing=smoothing)),
    "mse": (MeanSquaredError, lambda F, output, target: F.mse_loss(output, target)),
    "attention": (attention.ScaledDotProductAttention,
                  lambda F, q, k, v, mask, p, causal, scale: F.scaled_dot_product_attention(
                      q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal, scale=scale)),
    "embedding": (embedding.Embedding, lambda F, indices, weight: F.embedding(indices, weight)),
}


def minigrad_op(kind):
    """minigrad's ``Function`` class for op ``kind``."""
    return _OPS[kind][0]


def right_call(backend, kind, *args):
    """The op ``kind`` itself on ``args`` (in minigrad's order): the healthy twin of a plant."""
    op, torch_forward = _OPS[kind]
    if backend == "minigrad":
        return op.apply(*args)
    import torch.nn.functional as F

    return torch_forward(F, *args)


# ------------------------------------------------------------------------- spoils
def spoiled_backward(index, spoil):
    """minigrad's form for ``patching.patched_backward``: ``wrong(right, ctx, grad)``, the
    right backward with gradient ``index`` spoiled (when that gradient is needed at all)."""
    def wrong(right, ctx, grad):
        grads = right(ctx, grad)
        grads = list(grads) if isinstance(grads, tuple) else [grads]
        if grads[index] is not None:
            grads[index] = spoil(_arrays(ctx.inputs), grad, grads[index])
        return tuple(grads)
    return wrong


def spoiled_function(backend, kind, index, spoil):
    """The op ``kind`` whose gradient ``index`` is ``spoil``ed, as a Function of ``backend``."""
    op, torch_forward = _OPS[kind]
    if backend == "minigrad":
        wrong = spoiled_backward(index, spoil)
        return _named(type("Spoiled", (op,), {
            "backward": staticmethod(lambda ctx, grad: wrong(op.backward, ctx, grad)),
            "__doc__": spoil.__doc__}), op.__name__, spoil)

    def backward(ctx, grad):
        grads = _torch_right_gradients(ctx, torch_forward, grad)
        if grads[index] is not None:
            wrong = spoil(_numpy_args(ctx), _to_numpy(grad), _to_numpy(grads[index]))
            grads[index] = _like(wrong, grads[index])
        return tuple(grads)

    return _named(_torch_function(torch_forward, backward, spoil.__doc__), kind, spoil)


def planted_function(backend, kind, wrong):
    """The op ``kind`` with ``wrong(inputs, grad)`` as its whole backward, on ``backend``."""
    op, torch_forward = _OPS[kind]
    if backend == "minigrad":
        return _named(type("Planted", (op,), {
            "backward": staticmethod(lambda ctx, grad: wrong(_arrays(ctx.inputs), grad)),
            "__doc__": wrong.__doc__}), op.__name__, wrong)

    def backward(ctx, grad):
        grads = wrong(_numpy_args(ctx), _to_numpy(grad))
        return tuple(None if g is None else _like(g, grad, dtype=ctx.dtype) for g in grads)

    return _named(_torch_function(torch_forward, backward, wrong.__doc__), kind, wrong)


# ---------------------------------------------------------------------- torch side
def _torch_function(torch_forward, backward, doc):
    import torch
    import torch.nn.functional as F

    class Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            ctx.args = args
            ctx.dtype = next(a.dtype for a in args if torch.is_tensor(a) and a.is_floating_point())
            return torch_forward(F, *args)

    Function.backward = staticmethod(backward)
    Function.__doc__ = doc
    return Function


def _torch_right_gradients(ctx, torch_forward, grad):
    """torch's own gradients of the op at the saved inputs (state the forward updates in
    place, such as running statistics, is a copy here and stays untouched)."""
    import torch
    import torch.nn.functional as F

    wanted = [i for i, needed in enumerate(ctx.needs_input_grad) if needed]
    args = [a.detach().clone() if torch.is_tensor(a) else a for a in ctx.args]
    for i in wanted:
        args[i].requires_grad_()
    with torch.enable_grad():
        out = torch_forward(F, *args)
        found = torch.autograd.grad(out, [args[i] for i in wanted], grad, allow_unused=True)
    grads = [None] * len(args)
    for i, g in zip(wanted, found):
        grads[i] = g
    return grads


def _numpy_args(ctx):
    """The saved arguments, tensors as arrays (made in backward: forward stays torch's cost)."""
    import torch

    return tuple(_to_numpy(a) if torch.is_tensor(a) else a for a in ctx.args)


def _to_numpy(tensor):
    return tensor.detach().cpu().numpy()


def _like(array, tensor, *, dtype=None):
    import torch

    return torch.from_numpy(np.ascontiguousarray(array)).to(
        device=tensor.device, dtype=tensor.dtype if dtype is None else dtype)


# -------------------------------------------------------------------------- shared
def _arrays(inputs):
    return tuple(x.data if isinstance(x, Tensor) else x for x in inputs)


def _named(function, prefix, formula):
    function.__name__ = function.__qualname__ = f"{prefix}_{formula.__name__}"
    return function
