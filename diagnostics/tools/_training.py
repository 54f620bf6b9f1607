"""What the training tools share: argument checks, batch conversion, one optimizer step."""
import math
import numbers

import numpy as np

from ..backends import get_backend
from ..errors import DiagnosticsError, require

DEFAULT_OPTIMIZER = "Adam"


def check_callable(value, argument):
    require(callable(value), argument, "a callable", type(value).__name__)


def check_int(value, argument, *, minimum):
    require(isinstance(value, numbers.Integral) and not isinstance(value, bool)
            and value >= minimum, argument, f"an integer >= {minimum}", repr(value))


def check_float(value, argument, *, expected, accept):
    ok = (isinstance(value, numbers.Real) and not isinstance(value, bool)
          and math.isfinite(value) and accept(float(value)))
    require(ok, argument, expected, repr(value))


def as_model_tensor(backend, value, argument):
    """``value`` as a tensor of the model's framework.

    Framework tensors pass unchanged; NumPy arrays are converted, floating ones to the model's
    floating dtype (so float64 data meets a float32 model); a tuple converts element-wise
    (several inputs to ``forward``).
    """
    if isinstance(value, tuple):
        require(len(value) > 0, argument, "a tensor, an array or a non-empty tuple of them", "()")
        return tuple(as_model_tensor(backend, v, f"{argument}[{i}]") for i, v in enumerate(value))
    if backend.is_tensor(value):
        return value
    if isinstance(value, np.ndarray):
        if np.issubdtype(value.dtype, np.floating):
            value = value.astype(backend.floating_dtype(), copy=False)
        return backend.from_numpy(value, like=_first_parameter(backend))
    raise DiagnosticsError(
        f"{argument}: expected a {backend.name} tensor or a NumPy array, got "
        f"{type(value).__module__}.{type(value).__qualname__}")


def first_dimension(backend, value):
    """The batch size of a converted input (the first tensor's first dimension), or None."""
    first = value[0] if isinstance(value, tuple) else value
    shape = tuple(first.shape)
    return shape[0] if shape else None


def check_optimizer(backend, optimizer, argument="optimizer"):
    """A ``DiagnosticsError`` unless ``optimizer`` looks like one and holds only this model's
    parameters."""
    shaped = (hasattr(optimizer, "param_groups") and callable(getattr(optimizer, "step", None))
              and callable(getattr(optimizer, "zero_grad", None)))
    require(shaped, argument, "a torch.optim or minigrad.optim optimizer (param_groups, step, "
            "zero_grad)", type(optimizer).__name__)
    foreign = foreign_parameter_count(backend, optimizer)
    require(foreign == 0, argument, "an optimizer over this model's parameters",
            f"one holding {foreign} tensor(s) that are not the model's (was it built for a "
            f"copy of the model?)")


def foreign_parameter_count(backend, optimizer):
    """How many tensors ``optimizer`` updates that are not parameters of the model."""
    own = {id(param) for _, param in backend.named_parameters()}
    return sum(id(param) not in own for group in optimizer.param_groups
               for param in group["params"])


def make_optimizer(backend, optimizer, *, lr):
    """``optimizer`` itself, or a fresh Adam over the model's trainable parameters."""
    if optimizer is not None:
        return optimizer
    return backend.new_optimizer(DEFAULT_OPTIMIZER, lr=lr)


def set_lr(optimizer, lr):
    for group in optimizer.param_groups:
        group["lr"] = lr


def learning_rates(optimizer):
    return [float(group["lr"]) for group in optimizer.param_groups]


def lr_text(optimizer):
    """The optimizer's distinct learning rates, as ``"0.1"`` or ``"0.01, 0.1"``."""
    return ", ".join(f"{lr:g}" for lr in sorted(set(learning_rates(optimizer))))


def checked_batch(model, loss_fn, inputs, targets, optimizer):
    """The backend and the batch as the model's tensors, after checking the arguments that
    the tools training on one batch share."""
    backend = get_backend(model)
    check_callable(loss_fn, "loss_fn")
    inputs = as_model_tensor(backend, inputs, "inputs")
    targets = as_model_tensor(backend, targets, "targets")
    if optimizer is not None:
        check_optimizer(backend, optimizer)
    return backend, inputs, targets


def compute_loss(backend, loss_fn, inputs, targets):
    """``(output, loss)`` of one forward pass; a ``DiagnosticsError`` if the loss is not a
    scalar."""
    output = backend.forward(inputs)
    loss = loss_fn(output, targets)
    require(backend.is_tensor(loss) and int(np.prod(tuple(loss.shape))) == 1, "loss_fn",
            "a function returning a one-element loss tensor (reduction 'mean' or 'sum')",
            f"{type(loss).__name__} of shape {tuple(getattr(loss, 'shape', ()))}")
    return output, loss


def train_step(backend, optimizer, loss_fn, inputs, targets):
    """zero_grad, forward, loss, backward, step; returns ``(loss before the step, output)``."""
    backend.zero_grad()
    output, loss = compute_loss(backend, loss_fn, inputs, targets)
    value = backend.scalar(loss)
    if math.isfinite(value):
        backend.backward(loss)
        optimizer.step()
    return value, output


def uninformative_loss(backend, loss_fn, output, targets):
    """The loss of an all-zero output like ``output`` (ndarray): -log(1/C) for cross-entropy over
    C classes, mean(y**2) for MSE. None when the loss cannot take it or is not positive."""
    zeros = backend.from_numpy(np.zeros_like(output), like=targets)
    try:
        with backend.no_grad():
            value = backend.scalar(loss_fn(zeros, targets))
    except Exception:  # a loss that cannot take a plain zero output has no baseline
        return None
    return value if math.isfinite(value) and value > 0 else None


def is_class_indices(output, targets):
    """True when ``targets`` (ndarray) are class indices for ``output`` (ndarray of scores)."""
    return (np.issubdtype(targets.dtype, np.integer) and output.ndim == targets.ndim + 1
            and output.shape[:1] + output.shape[2:] == targets.shape)


def accuracy(output, targets):
    """Fraction of argmax-correct predictions for class-index targets, else None."""
    if not is_class_indices(output, targets):
        return None
    return float(np.mean(np.argmax(output, axis=1) == targets))


def to_numpy(backend, value):
    first = value[0] if isinstance(value, tuple) else value
    return backend.to_numpy(first)


def _first_parameter(backend):
    params = backend.named_parameters()
    return params[0][1] if params else None
