"""``LossCall``: the batch and the loss of a check, converted and checked before any work starts.

Inputs and targets may be tensors of the model's framework or NumPy arrays (converted for the
user), alone or in a tuple. Floating ones become float64 like the copied model; integer ones
(class indices) stay integer. ``check_output`` and ``check_loss`` turn a user's mistake seen in
the first forward pass (targets of the wrong shape, a loss that is not one number) into a
``DiagnosticsError`` that names the argument.
"""
import math
from dataclasses import dataclass

import numpy as np

from ..backends import get_backend
from ..errors import DiagnosticsError, require


@dataclass(frozen=True)
class LossCall:
    """``loss_fn(model(*inputs), targets)`` on one batch."""

    inputs: tuple
    targets: object
    loss_fn: object
    batch_size: int

    def output(self, backend):
        return backend.model(*self.inputs)

    def loss(self, output):
        return self.loss_fn(output, self.targets)


def prepare_call(backend, loss_fn, inputs, targets):
    """Convert and check the batch for ``backend``'s framework (``DiagnosticsError`` on misuse)."""
    require(callable(loss_fn), "loss_fn", "a callable loss_fn(output, targets)",
            type(loss_fn).__name__)
    loss_fn = _own_loss(backend, loss_fn)
    values = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    require(len(values) > 0, "inputs", "a tensor, a NumPy array, or a tuple of them", "()")
    converted = tuple(_convert(backend, value, "inputs") for value in values)
    for array_shape in (tuple(value.shape) for value in converted):
        require(len(array_shape) > 0 and array_shape[0] > 0 and 0 not in array_shape, "inputs",
                "a non-empty batch (a leading batch dimension of size >= 1)",
                f"shape {array_shape}")
    if isinstance(targets, (tuple, list)):
        targets = tuple(_convert(backend, value, "targets") for value in targets)
    elif targets is not None:
        targets = _convert(backend, targets, "targets")
    return LossCall(converted, targets, loss_fn, int(converted[0].shape[0]))


def check_output(backend, output, targets):
    """Targets whose shape does not fit the model's output (checked for one tensor of each)."""
    if not (backend.is_tensor(output) and backend.is_tensor(targets)):
        return
    out_shape, target_shape = tuple(output.shape), tuple(targets.shape)
    kind = backend.to_numpy(targets).dtype.kind
    if kind in "iu":   # (N, C, ...) logits, or (N, ..., C) as a sequence model's loss flattens
        expected = [out_shape[:1] + out_shape[2:], out_shape[:-1]] if len(out_shape) >= 2 \
            else [()]
        shown = " or ".join(str(s) for s in dict.fromkeys(expected))
        require(target_shape in expected, "targets",
                f"class indices of shape {shown} for a model output of shape {out_shape}",
                f"shape {target_shape}")
    else:
        require(target_shape == out_shape, "targets",
                f"shape {out_shape}, the model output's (another shape broadcasts silently in "
                f"the loss; pass targets in a tuple to skip this check)", f"shape {target_shape}")


def check_loss(backend, loss):
    """A loss that is a one-element tensor of the framework, finite, and part of the graph."""
    framework = backend.name
    require(backend.is_tensor(loss), "loss_fn",
            f"to return a {framework} tensor holding one number (not a float from .item())",
            type(loss).__name__)
    size = int(np.prod(tuple(loss.shape), dtype=np.int64))
    require(size == 1, "loss_fn", "a scalar loss (one element); reduce it, e.g. with .mean()",
            f"shape {tuple(loss.shape)}")
    value = backend.scalar(loss)
    require(math.isfinite(value), "loss_fn", "a finite loss on this batch", value)
    require(bool(loss.requires_grad), "loss_fn",
            "a loss computed from the model's output inside the graph (requires_grad is "
            "False: was it built from .detach()ed or .item() values?)", "requires_grad=False")


def _convert(backend, value, argument):
    accepted = f"a {backend.name} tensor, a NumPy array, or a tuple of them"
    if backend.is_tensor(value):
        array = backend.to_numpy(value)
    elif isinstance(value, np.ndarray):
        array = value
    else:
        kind = f"{type(value).__module__}.{type(value).__qualname__}"
        raise DiagnosticsError(f"{argument}: expected {accepted}, got {kind}")
    if array.dtype.kind == "f":
        array = array.astype(np.float64)
    elif array.dtype.kind not in "iub":
        raise DiagnosticsError(f"{argument}: expected numbers (float, int or bool), "
                               f"got dtype {array.dtype}")
    return backend.from_numpy(np.array(array, copy=True), like=_first_parameter(backend))


def _first_parameter(backend):
    parameters = backend.named_parameters()
    return parameters[0][1] if parameters else None


def _own_loss(backend, loss_fn):
    """A loss module of the model's framework, copied in float64 without hooks; others as given."""
    try:
        loss_backend = get_backend(loss_fn, argument="loss_fn")
    except DiagnosticsError:
        return loss_fn
    require(type(loss_backend) is type(backend), "loss_fn",
            f"a loss of the model's framework ({backend.name})",
            f"a {loss_backend.name} module")
    return loss_backend.clone(dtype=np.float64).model
