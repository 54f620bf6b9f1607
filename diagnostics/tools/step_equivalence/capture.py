"""Run the user's ``train_step`` once, on a float64 copy, and read what it would apply.

The step runs as written up to its first ``optimizer.step()`` (of any torch optimizer): a
global step pre-hook reads the gradients there and ends the step with a private
``BaseException`` (a user's ``except Exception`` does not swallow it), so nothing after the
step runs (a scheduler's or a GradScaler's update, a counter of the user's), and no parameter
or optimizer state moves. Along the way it reads what the step fed the model (which rows of
the batch, in which modes) and the gradients as each backward pass left them, so a change made
between the last backward and the step (clipping, unscaling, a manual division) is told apart
from what the backward computed. A step that calls ``optimizer.step(closure)`` has its
closure run first, as the optimizer would.
"""
import contextlib
import functools
from dataclasses import dataclass

import numpy as np

from ... import outputs


NO_STEP = "train_step returned without calling optimizer.step(): it applies no gradient"


class _StepReached(BaseException):
    """Raised at the first ``optimizer.step()`` to end the user's step there."""


@dataclass(frozen=True)
class ForwardCall:
    """One call of the model during the step: the batch rows it was fed (None when the fed
    tensor is not made of the batch's rows), the train/eval flag of every module then, what it
    returned and the gradient the step's backward passes sent into each floating
    entry of it (``output_grads``, by entry key; filled as the backward passes run)."""

    rows: tuple[int, ...] | None
    modes: tuple[bool, ...]
    output: object
    output_grads: dict
    upstream: frozenset = frozenset()   # entries computed from by another entry (features)
    extra_inputs: bool = False          # fed more than the batch (a carried hidden state)
    low_precision: bool = False         # under autocast, or half-precision outputs


@dataclass(frozen=True)
class StepCapture:
    """What one run of ``train_step`` did. ``applied`` and ``after_backward``: flat gradient
    vectors over the trainable parameters (``after_backward`` as the last backward pass left
    them); None when the step never reached ``optimizer.step()`` (``error`` then says why,
    quoting the user's exception where there was one)."""

    applied: np.ndarray | None
    after_backward: np.ndarray | None
    calls: tuple[ForwardCall, ...]
    stepped: bool
    other_optimizer: bool
    error: str | None
    backward_passes: int = 0
    cleared_after: tuple[int, ...] = ()   # zero_grad() calls, by the backward passes before
    scaled: bool = False                  # a GradScaler scaled the loss


def capture_step(torch, model, optimizer, train_step, batch, *, batch_rows, keywords=(),
                 positional=1):
    """A ``StepCapture`` of ``train_step(model, batch, optimizer)``; ``batch_rows(tensor)``
    says which rows of the batch a fed tensor holds (None if it does not hold rows of it);
    ``keywords`` and ``positional``: the batch's keyword inputs (a dict batch) and its count of
    positional ones, which are not extra inputs."""
    params = trainable(model)
    calls, latest, applied = [], {}, {}
    modules = list(model.modules())

    def on_forward(_module, args, kwargs, output):
        fed = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
        fed = kwargs.get("input_ids", fed)
        rows = None if fed is None else batch_rows(fed)
        grads, tensors = {}, {}
        for key, value in outputs.entries(output):
            if isinstance(value, torch.Tensor) and value.requires_grad:
                value.register_hook(functools.partial(_add_gradient, grads, key))
                tensors[key] = value
        extra = (len([a for a in args if a is not None]) > positional
                 or any(v is not None for k, v in kwargs.items() if k not in keywords))
        low = _autocasting(torch) or any(t.dtype in (torch.float16, torch.bfloat16)
                                         for t in tensors.values())
        calls.append(ForwardCall(rows, tuple(m.training for m in modules), output, grads,
                                 _upstream(tensors), extra, low))

    def on_accumulated(param):
        latest[id(param)] = param.grad.detach().clone()

    def on_step(stepping, args, kwargs):
        args = args[1:] if args and args[0] is stepping else args   # (self, closure)
        closure = kwargs.get("closure", args[0] if args else None)
        counting[0] = False
        if callable(closure):
            with torch.enable_grad():
                closure()
        applied["vector"] = flat(torch, params, {id(p): p.grad for p in params})
        applied["other"] = stepping is not optimizer
        raise _StepReached

    from torch.optim.optimizer import register_optimizer_step_pre_hook
    scales = []
    handles = [model.register_forward_hook(on_forward, with_kwargs=True)]
    handles += [p.register_post_accumulate_grad_hook(on_accumulated) for p in params]
    handles.append(register_optimizer_step_pre_hook(on_step))
    error, passes, cleared, counting = None, [0], [], [True]
    try:
        with _scales_recorded(torch, scales), _counted(torch, passes, cleared) as counting:
            train_step(model, batch, optimizer)
        error = NO_STEP
    except _StepReached:
        pass
    except Exception as raised:   # the user's code: quoted, never re-raised
        error = f"train_step raised {type(raised).__name__}: {raised}"
    finally:
        for handle in handles:
            handle.remove()
    stepped = "vector" in applied
    after = flat(torch, params, latest) if stepped and latest else None
    if len(set(scales)) == 1:     # the loss a GradScaler scaled: its unscaled gradients
        after = None if after is None else after / scales[0]
        for call in calls:
            for key in call.output_grads:
                call.output_grads[key] = call.output_grads[key] / scales[0]
    return StepCapture(
        applied=applied.get("vector"), after_backward=after,
        calls=tuple(calls), stepped=stepped, other_optimizer=applied.get("other", False),
        error=None if stepped else error, backward_passes=passes[0],
        cleared_after=tuple(cleared), scaled=bool(scales))


@contextlib.contextmanager
def _scales_recorded(torch, scales):
    """``GradScaler.scale`` wrapped while the step runs, to note the factor it multiplies the
    loss by (its backward's gradients are that many times the loss's)."""
    scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
    original = getattr(scaler, "scale", None)
    if original is None:
        yield
        return

    def scale(self, outputs):
        if getattr(self, "is_enabled", lambda: False)():
            result = original(self, outputs)
            scales.append(float(self.get_scale()))
            return result
        return original(self, outputs)

    scaler.scale = scale
    try:
        yield
    finally:
        scaler.scale = original


@contextlib.contextmanager
def _counted(torch, passes, cleared):
    """``torch.autograd.backward`` (which ``Tensor.backward`` calls) counted into ``passes``,
    and ``zero_grad()`` of optimizers and modules noted in ``cleared`` with the count of
    backward passes before it, while the step runs (its closure, run at the step, excepted)."""
    owners = [(torch.autograd, "backward"), (torch.optim.Optimizer, "zero_grad"),
              (torch.nn.Module, "zero_grad")]
    originals = [getattr(owner, name) for owner, name in owners]
    backward, optimizer_clear, module_clear = originals
    live = [True]

    def counted_backward(*args, **kwargs):
        if live[0]:
            passes[0] += 1
        return backward(*args, **kwargs)

    def noted(clear):
        def zero_grad(self, *args, **kwargs):
            if live[0] and passes[0]:
                cleared.append(passes[0])
            return clear(self, *args, **kwargs)
        return zero_grad

    replacements = [counted_backward, noted(optimizer_clear), noted(module_clear)]
    try:
        for (owner, name), replacement in zip(owners, replacements):
            setattr(owner, name, replacement)
        yield live
    finally:
        live[0] = False
        for (owner, name), original in zip(owners, originals):
            setattr(owner, name, original)


def _autocasting(torch):
    try:
        return any(torch.is_autocast_enabled(device) for device in ("cpu", "cuda"))
    except (TypeError, RuntimeError):     # an older signature
        return bool(torch.is_autocast_enabled())


def _upstream(tensors, limit=100_000):
    """The keys of output entries that another entry is computed from (an encoder's features
    beside the logits made of them): the gradient they receive is not the loss's alone."""
    nodes = {key: value.grad_fn for key, value in tensors.items() if value.grad_fn is not None}
    found = set()
    for key, start in nodes.items():
        others = {id(node): other for other, node in nodes.items() if other != key}
        seen, stack = set(), [start]
        while stack and len(seen) < limit and others:
            node = stack.pop()
            for parent, _ in getattr(node, "next_functions", ()):
                if parent is None or id(parent) in seen:
                    continue
                seen.add(id(parent))
                if id(parent) in others:
                    found.add(others.pop(id(parent)))
                stack.append(parent)
    return frozenset(found)


def _add_gradient(grads, key, gradient):
    grads[key] = grads[key] + gradient.detach() if key in grads else gradient.detach().clone()


def trainable(model):
    """The parameters a step trains, in the model's order (shared ones once)."""
    seen, params = set(), []
    for param in model.parameters():
        if param.requires_grad and id(param) not in seen:
            seen.add(id(param))
            params.append(param)
    return params


def flat(torch, params, grads):
    """One float64 vector of the gradients ``grads[id(p)]`` (zeros where there is none)."""
    pieces = []
    for param in params:
        grad = grads.get(id(param))
        pieces.append(np.zeros(param.numel()) if grad is None
                      else grad.detach().to(torch.float64).reshape(-1).cpu().numpy())
    return np.concatenate(pieces) if pieces else np.zeros(0)


@contextlib.contextmanager
def modes(model, flags):
    """The model's modules set to ``flags`` (as ``ForwardCall.modes`` recorded them), put back
    after."""
    modules = list(model.modules())
    before = [m.training for m in modules]
    try:
        for module, flag in zip(modules, flags):
            module.training = flag
        yield
    finally:
        for module, flag in zip(modules, before):
            module.training = flag
