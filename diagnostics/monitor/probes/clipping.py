"""Gradient clipping called on gradients a GradScaler still multiplies by its scale.

``clip_grad_norm_`` before ``scaler.unscale_(optimizer)`` measures the norm of the scaled
gradients (65536 times too large by default) and cuts them to ``max_norm`` in those units:
once ``scaler.step`` divides by the scale, every update is about scale times too small. The
gradients themselves look healthy, so this is seen at the call: while a Monitor given an
enabled ``scaler`` and an ``optimizer`` is open, ``torch.nn.utils.clip_grad_norm_`` and
``clip_grad_value_`` (on ``torch.nn.utils`` and ``torch.nn.utils.clip_grad``) are wrapped.
The wrapper runs the original on the same parameters and, when they hold gradients of the
Monitor's optimizer whose stage in the scaler is not UNSCALED (``unscale_`` not called since
the last ``update()``), notes the call. One patch serves every open Monitor; the last one to
close puts the originals back. ``clip_grad_norm_`` imported by name before the Monitor was
made (``from torch.nn.utils import clip_grad_norm_``, the common spelling) is seen through the
helper every call of it goes through, looked up when it runs (``clip_grad._clip_grads_with_
norm_``; its ``norm_type`` is then unknown, NaN); ``clip_grad_value_`` imported by name is not.
"""
import functools
import threading
from dataclasses import dataclass, replace

from .base import Probe, Signal
from .shared_patch import SharedPatch, restore_attributes

PATCHED = ("clip_grad_norm_", "clip_grad_value_")
LIMITS = {"clip_grad_norm_": "max_norm", "clip_grad_value_": "clip_value"}

INNER = "_clip_grads_with_norm_"   # clip_grad_norm_'s second half, in torch.nn.utils.clip_grad

_LISTENERS = []       # the open probes, each told of every clipping call
_INSTALLED = []       # (owner, name, original, wrapper) while any probe listens
_CALLS = threading.local()   # .depth: wrapped public clipping calls under way in this thread


@dataclass(frozen=True)
class ScaledClip(Signal):
    """What the check reads (``view.signal(ScaledClip)``): the calls that clipped
    still-scaled gradients: the first one, its numbers read at a transfer."""

    function: str          # "clip_grad_norm_" or "clip_grad_value_"
    limit: float           # its max_norm or clip_value
    step: int              # the first call's iteration
    scale: float = float("nan")        # the loss scale at the first call
    total_norm: float = float("nan")   # the (scaled) norm clip_grad_norm_ measured then
    norm_type: float = 2.0


class ClippingProbe(Probe):
    publishes = (ScaledClip,)

    def __init__(self, ctx):
        super().__init__(ctx)
        scaler, optimizer = ctx.scaler, ctx.optimizer
        self._watch = (scaler is not None and optimizer is not None
                       and ctx.backend.name == "torch" and scaler.is_enabled())
        self._listening = False
        self._held = None       # (group sizes, ids of the optimizer's parameters)
        self.found = None
        self._pending = None    # [scale, total norm] tensors to read at the next transfer
        self._error = None      # an exception of ``note``, raised where the Monitor guards

    def begin(self):
        if self._watch and not self._listening:    # after __init__: nothing left to fail
            _PATCH.listen(self)
            self._listening = True

    def note(self, function, parameters, args, kwargs, result):
        """A clipping call ran (called by the patch, after the original). Never raises into
        the user's call: an exception waits for the next transfer, where the Monitor turns
        the probe off and quotes it (MONITOR_ERROR)."""
        try:
            self._note(function, parameters, args, kwargs, result)
        except Exception as error:   # noqa: BLE001 - a scaler or optimizer of another shape
            self._error = self._error or error

    def _note(self, function, parameters, args, kwargs, result):
        scaler, optimizer = self.ctx.scaler, self.ctx.optimizer
        if self.found is not None or not scaler.is_enabled():    # the first one tells
            return
        held = self._held_ids(optimizer)
        if not any(id(p) in held and p.grad is not None for p in parameters):
            return
        states = getattr(scaler, "_per_optimizer_states", None)
        if not isinstance(states, dict):
            return
        state = states.get(id(optimizer))     # none yet: READY, nothing unscaled this step
        stage = "READY" if state is None else getattr(state.get("stage"), "name", None)
        if stage != "READY":        # UNSCALED (or STEPPED: scaler.step unscaled them)
            return
        limit = float(args[1] if len(args) > 1 else kwargs.get(LIMITS[function]))
        norm_type = float(args[2] if len(args) > 2 else kwargs.get("norm_type", 2.0))
        self.found = ScaledClip(function, limit, self.ctx.step, norm_type=norm_type)
        scale = self.ctx.kernels.loss_scale(scaler)
        tensors = [scale.detach().float().clone()] if scale is not None else []
        if tensors and function == "clip_grad_norm_" and hasattr(result, "detach"):
            tensors.append(result.detach().float().reshape(()).to(tensors[0].device))
        self._pending = tensors or None

    def _held_ids(self, optimizer):
        groups = optimizer.param_groups
        sizes = tuple(len(group["params"]) for group in groups)
        if self._held is None or self._held[0] != sizes:
            self._held = (sizes, {id(p) for group in groups for p in group["params"]})
        return self._held[1]

    def contribute(self):
        if self._error is not None:
            raise self._error
        tensors, self._pending = self._pending, None
        if tensors:
            def receive(values):
                found = self.found
                self.found = replace(found, scale=float(values[0]), total_norm=float(
                    values[1]) if len(values) > 1 else found.total_norm)
            self.ctx.collector.add(tensors, receive)

    def signals(self):
        return () if self.found is None else (self.found,)

    def close(self):
        self._pending = None
        if self._listening:
            self._listening = False
            _PATCH.unlisten(self)


def _install():
    import torch.nn.utils
    import torch.nn.utils.clip_grad

    try:
        for owner in (torch.nn.utils, torch.nn.utils.clip_grad):
            for name in PATCHED:
                original = getattr(owner, name, None)
                if callable(original):
                    wrapper = _wrap(name, original)
                    setattr(owner, name, wrapper)
                    _INSTALLED.append((owner, name, original, wrapper))
        inner = getattr(torch.nn.utils.clip_grad, INNER, None)
        if callable(inner):
            wrapper = _wrap_inner(inner)
            setattr(torch.nn.utils.clip_grad, INNER, wrapper)
            _INSTALLED.append((torch.nn.utils.clip_grad, INNER, inner, wrapper))
    except BaseException:
        _uninstall()
        raise


def _uninstall():
    restore_attributes(_INSTALLED)


def _wrap(function, original):
    @functools.wraps(original)
    def clip(*args, **kwargs):
        if not _LISTENERS:
            return original(*args, **kwargs)
        try:
            args, kwargs, parameters = _materialized(args, kwargs)
        except Exception:    # not an iterable of tensors: the original says so in its words
            return original(*args, **kwargs)
        _CALLS.depth = getattr(_CALLS, "depth", 0) + 1
        try:
            result = original(*args, **kwargs)
        finally:
            _CALLS.depth -= 1
        for listener in tuple(_LISTENERS):     # a copy: a Monitor may close meanwhile
            listener.note(function, parameters, args, kwargs, result)
        return result
    return clip


def _wrap_inner(original):
    """``_clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)``: noted as the
    ``clip_grad_norm_`` call it serves when no wrapped public function is under way (one
    imported by name before the patch), with the total norm that call measured."""
    @functools.wraps(original)
    def clip(*args, **kwargs):
        if not _LISTENERS or getattr(_CALLS, "depth", 0):
            return original(*args, **kwargs)
        try:
            args, kwargs, parameters = _materialized(args, kwargs)
            limit = args[1] if len(args) > 1 else kwargs["max_norm"]
            total = args[2] if len(args) > 2 else kwargs["total_norm"]
        except Exception:    # not the call it should be: the original says so in its words
            return original(*args, **kwargs)
        result = original(*args, **kwargs)
        for listener in tuple(_LISTENERS):
            listener.note("clip_grad_norm_", parameters, (parameters, limit),
                          {"norm_type": float("nan")}, total)
        return result
    return clip


def _materialized(args, kwargs):
    """The call's arguments with ``parameters`` (a generator, often) made a list, so that
    the original and the listeners both see every tensor."""
    if args:
        parameters, rest = args[0], args[1:]
    elif "parameters" in kwargs:
        kwargs = dict(kwargs)
        parameters, rest = kwargs.pop("parameters"), ()
    else:
        return args, kwargs, []
    import torch

    parameters = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
    return (parameters,) + tuple(rest), kwargs, parameters


_PATCH = SharedPatch(_LISTENERS, install=_install, uninstall=_uninstall)
