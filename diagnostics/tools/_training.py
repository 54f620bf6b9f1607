"""What the training tools share: argument checks, the batch, one optimizer step."""
import contextlib
import math
import numbers

import numpy as np

from .. import outputs
from ..backends import get_backend
from ..batch import Batch, first_parameter, model_tensor
from ..errors import DiagnosticsError, require
from ..layouts import class_axis
from ..validators import check_callable, check_float, check_int  # noqa: F401 (the tools' checks)

DEFAULT_OPTIMIZER = "Adam"


def as_model_tensor(backend, value, argument):
    """``value`` as a tensor of the model's framework (a tuple element-wise).

    Framework tensors pass unchanged; NumPy arrays are converted, floating ones to the model's
    floating dtype (so float64 data meets a float32 model).
    """
    if isinstance(value, tuple):
        require(len(value) > 0, argument, "a tensor, an array or a non-empty tuple of them", "()")
        return tuple(as_model_tensor(backend, v, f"{argument}[{i}]") for i, v in enumerate(value))
    tensor = model_tensor(backend, value)
    if tensor is not None:
        return tensor
    raise DiagnosticsError(
        f"{argument}: expected a {backend.name} tensor or a NumPy array, got "
        f"{type(value).__module__}.{type(value).__qualname__}")


def check_parameters(backend):
    """A ``DiagnosticsError`` naming ``model`` when it has no parameters at all: nothing in it
    can learn, so training it (and building an optimizer over it) would only fail later."""
    require(len(backend.named_parameters()) > 0, "model",
            "a model with parameters to train",
            f"{type(backend.model).__name__} with no parameters (model.parameters() is empty: "
            f"are its layers registered as submodules, not kept in a plain list or built "
            f"inside forward?)")


def check_optimizer(backend, optimizer, argument="optimizer"):
    """A ``DiagnosticsError`` unless ``optimizer`` looks like one and is this model's: one that
    holds other tensors while it lacks some of the model's trainable parameters was built for
    a copy of the model. Extra learnable tensors beside all of the model's (a loss's
    temperature, a prompt) are the user's design; the tools restore them with the model."""
    check_optimizer_shape(optimizer, argument)
    foreign = foreign_parameter_count(backend, optimizer)
    missing = unheld_parameters(backend, optimizer)
    require(foreign == 0 or not missing, argument, "an optimizer over this model's parameters",
            f"one holding {foreign} tensor(s) that are not the model's and lacking "
            f"{len(missing)} of its trainable parameters (was it built for a copy of the "
            f"model?)")


def check_optimizer_shape(optimizer, argument="optimizer"):
    shaped = (hasattr(optimizer, "param_groups") and callable(getattr(optimizer, "step", None))
              and callable(getattr(optimizer, "zero_grad", None)))
    require(shaped, argument, "a torch.optim or minigrad.optim optimizer (param_groups, step, "
            "zero_grad)", type(optimizer).__name__)


def foreign_parameter_count(backend, optimizer):
    """How many tensors ``optimizer`` updates that are not parameters of the model."""
    return len(foreign_parameters(backend, optimizer))


def foreign_parameters(backend, optimizer):
    """The tensors ``optimizer`` updates that are not parameters of the model."""
    return backend.outside_tensors(optimizer)


def unheld_parameters(backend, optimizer):
    """Names of the model's parameters that require a gradient and ``optimizer`` lacks."""
    held = {id(param) for group in optimizer.param_groups for param in group["params"]}
    return [name for name, param in backend.named_parameters()
            if param.requires_grad and id(param) not in held]


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


def base_rates(optimizer):
    """Each group's base rate: the ``initial_lr`` that torch's LR schedulers record in the
    groups they take over (a warm-up then sets ``lr`` far below it for its first steps),
    else its ``lr``."""
    return [float(group.get("initial_lr", group["lr"])) for group in optimizer.param_groups]


def scheduled(optimizer):
    """True when an LR scheduler has taken over the optimizer (its groups hold initial_lr)."""
    return any("initial_lr" in group for group in optimizer.param_groups)


@contextlib.contextmanager
def at_base_rates(optimizer):
    """The block with every group at its base rate (``base_rates``), then each ``lr`` put
    back: a tool's few hundred steps at a warm-up's first rate would judge a schedule's
    start, not the rate it trains at."""
    saved = [group["lr"] for group in optimizer.param_groups]
    for group, base in zip(optimizer.param_groups, base_rates(optimizer)):
        if isinstance(group["lr"], numbers.Real):    # a tensor lr (fused, capturable): as is
            group["lr"] = base
    try:
        yield optimizer
    finally:
        for group, lr in zip(optimizer.param_groups, saved):
            group["lr"] = lr


def lr_text(optimizer):
    """The optimizer's distinct base rates (``base_rates``), as ``"0.1"`` or ``"0.01, 0.1"``."""
    return _rates_text(base_rates(optimizer))


def rate_note(optimizer):
    """With an LR scheduler, a clause saying the rates quoted are its base rates (and where
    it has the lr now, when that differs); else ``""``."""
    if not scheduled(optimizer):
        return ""
    note = "; the learning rates quoted are the LR scheduler's base rates (initial_lr)"
    now = sorted(set(learning_rates(optimizer)))
    if now != sorted(set(base_rates(optimizer))):
        note += f", which these steps trained at, not the {_rates_text(now)} it sets now"
    return note


def _rates_text(rates):
    return ", ".join(f"{lr:g}" for lr in sorted(set(rates)))


def checked_batch(model, loss_fn, inputs, targets, *, optimizer=None, train_step=None,
                  output=None, check_foreign=True):
    """The backend and the ``Batch`` as the model's tensors, after checking the arguments
    that the tools training on one batch share."""
    backend = get_backend(model)
    check_parameters(backend)
    batch = Batch.prepare(backend, loss_fn, inputs, targets, output=output)
    if optimizer is not None and check_foreign:
        check_optimizer(backend, optimizer)
    elif optimizer is not None:
        check_optimizer_shape(optimizer)
    if train_step is not None:
        check_callable(train_step, "train_step")
    return backend, batch


def train_step(backend, optimizer, batch):
    """zero_grad, forward, loss, backward, step; returns ``(loss before the step, output)``."""
    backend.zero_grad()
    output, loss = batch.output_and_loss(backend)
    value = backend.scalar(loss)
    if math.isfinite(value):
        backend.backward(loss)
        optimizer.step()
    return value, output


def user_step(backend, optimizer, batch, step):
    """One call of the user's ``train_step(model, (inputs, targets), optimizer)``, measured:
    ``(loss before the step, output)`` from a pass without a graph just before it."""
    with backend.no_grad():
        output, loss = batch.output_and_loss(backend)
    value = backend.scalar(loss)
    if math.isfinite(value):
        step(backend.model, (batch.inputs, batch.targets), optimizer)
    return value, output


def stepper(backend, optimizer, batch, step=None):
    """A function making one training step: the user's ``train_step`` when given, else a
    plain one; each returns ``(loss before the step, output)``."""
    if step is None:
        return lambda: train_step(backend, optimizer, batch)
    return lambda: user_step(backend, optimizer, batch, step)


def uninformative_loss(backend, batch, output, key, logits):
    """The loss of an all-zero ``logits`` (ndarray, at ``key`` in ``output``): -log(1/C) for
    cross-entropy over C classes, mean(y**2) for MSE. None when the loss cannot take it or is
    not positive."""
    if logits is None:
        return None
    try:
        zeros = backend.from_numpy(np.zeros_like(logits), like=first_parameter(backend))
        with backend.no_grad():
            value = backend.scalar(batch.loss(outputs.replace(output, key, zeros)))
    except Exception:  # a loss that cannot take a plain zero output has no baseline
        return None
    return value if math.isfinite(value) and value > 0 else None


NO_LOGITS = object()


def logits_key(backend, batch, output):
    """Where the logits are in ``output`` (``diagnostics.outputs``), or ``NO_LOGITS``; found once
    and reused, since rule 4 runs the loss."""
    try:
        return batch.logits_key(backend, output)
    except LookupError:
        return NO_LOGITS


def logits_array(backend, output, key):
    """The logits at ``key`` of ``output`` as an ndarray, or None."""
    if key is NO_LOGITS:
        return None
    logits = outputs.pick(output, key)
    return backend.to_numpy(logits) if backend.is_tensor(logits) else None


def class_axis_of(logits, targets):
    """The class axis of ``logits`` (ndarray) for integer class-index ``targets``, or None."""
    if logits is None or targets is None or not np.issubdtype(targets.dtype, np.integer):
        return None
    return class_axis(logits.shape, targets.shape)


def accuracy(logits, targets):
    """Fraction of argmax-correct predictions for class-index targets, else None."""
    axis = class_axis_of(logits, targets)
    if axis is None:
        return None
    return float(np.mean(np.argmax(logits, axis=axis) == targets))
