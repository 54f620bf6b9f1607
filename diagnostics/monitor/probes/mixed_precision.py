"""Mixed precision: the dtype autocast computes in, a GradScaler's scale after every step, and
the steps it skipped.

A GradScaler multiplies the loss by its scale before backward, skips the optimizer step when
a gradient came out inf or NaN, and halves the scale: a few skipped steps while it finds its
scale are normal. With the scaler (``Monitor(scaler=...)``) the scale is read after every step
(``step`` after ``scaler.update()``): a step whose scale fell was skipped. Without it, fp16
autocast seen in a sampled forward marks that iteration's gradients as scaled by an unknown
factor, and a sampled step whose gradients hold inf or NaN counts as skipped.

A GradScaler the Monitor was not given is found where it acts: while a torch Monitor without
``scaler=`` is open, ``torch.amp.GradScaler.scale`` is wrapped (one patch for every open
Monitor, the originals back when the last closes). The first ``scale(loss)`` of a sampled
iteration whose graph reaches the model's parameters makes that scaler the one the gradients
are judged through: from that backward on they are divided by its scale, as ``unscale_`` will
divide them (a constant 65536 is no explosion). Its skipped steps are still counted as without
a scaler (``step`` may come before ``scaler.update()``: only a passed scaler promises that).
"""
import functools
import math
from dataclasses import dataclass

import numpy as np

from ..history import Series
from .base import Probe, Signal
from .shared_patch import SharedPatch


@dataclass(frozen=True)
class LossScaling(Signal):
    """What the mixed-precision check reads (``view.signal(LossScaling)``)."""

    autocast: str | None       # the dtype autocast computed in ("float16", "bfloat16"), if seen
    scaler: bool               # the Monitor was given an enabled GradScaler
    initial_scale: float       # the scale before the first recorded step (nan without scaler)
    scales: np.ndarray         # the scale after each recorded step (with a scaler)
    sampled: tuple = ()        # (step, skipped) of loss-scaled sampled steps, without scaler
    found: bool = False        # a GradScaler not passed was seen scaling the model's loss

    @property
    def skipped(self):
        """Per recorded step: the scale fell, so the scaler skipped the optimizer's step."""
        return self.scales < self.before

    @property
    def before(self):
        """The scale each recorded step ran with (the one after the step before)."""
        return np.concatenate(([self.initial_scale], self.scales[:-1]))

    @property
    def working_scale(self):
        """The largest scale at which a step went through; None when none did."""
        went_through = self.before[~self.skipped]
        return float(went_through.max()) if went_through.size else None

    @property
    def kind(self):
        precision = {"float16": "fp16 autocast", "bfloat16": "bf16 autocast"}.get(
            self.autocast, f"{self.autocast} autocast" if self.autocast else None)
        parts = [p for p in (precision, "GradScaler" if self.scaler else None) if p]
        return " + ".join(parts) or ("GradScaler" if self.found else "")

    def summary(self):
        """The report's line: the kind, the scale now and its lowest, the skipped steps."""
        if self.scaler and self.scales.size:
            return {"kind": self.kind, "scale": float(self.scales[-1]),
                    "lowest_scale": float(self.scales.min()),
                    "skipped_steps": int(self.skipped.sum()),
                    "counted_steps": int(self.scales.size)}
        summary = {"kind": self.kind}
        if self.found:
            summary["scaler_found"] = True     # not passed: gradients judged through it
        if self.sampled:
            summary.update(skipped_steps=sum(skipped for _, skipped in self.sampled),
                           counted_steps=len(self.sampled))
        return summary


class MixedPrecisionProbe(Probe):
    publishes = (LossScaling,)

    def __init__(self, ctx):
        super().__init__(ctx)
        scaler = ctx.scaler
        self._scaler = scaler if scaler is not None and scaler.is_enabled() else None
        self._initial = self._scaler.get_scale() if self._scaler is not None else math.nan
        ctx.loss_scaling = self._scaler is not None
        self._scales = Series()
        self._pending = []          # per step: a float, or a 0-d device tensor not yet read
        self._sampled = []
        self._autocast = None
        params = ctx.layout.trainable
        self._reference = params[0].tensor if params else None
        self._seek = scaler is None and ctx.backend.name == "torch"   # find an unnamed one
        self._listening = False
        self._found = False
        self._error = None          # what ``scaled`` raised, raised where the Monitor guards
        self._mine = {id(p.tensor) for p in params}

    def begin(self):
        if self._seek and not self._listening:
            _PATCH.listen(self)
            self._listening = True

    def scaled(self, scaler, outputs):
        """A GradScaler's ``scale(outputs)`` ran (called by the patch). Never raises into the
        user's call: an exception waits for the next transfer (MONITOR_ERROR)."""
        try:
            if not self._found and self.ctx.sample is not None and scaler.is_enabled() \
                    and self._reaches_model(outputs):
                self.ctx.scaler = scaler
                self._found = self.ctx.loss_scaling = True
        except Exception as error:   # noqa: BLE001 - a scaler or graph of another shape
            self._error = self._error or error

    def _reaches_model(self, outputs):
        """Whether the scaled loss's graph reaches one of the model's trainable parameters:
        this scaler scales this model's gradients (not another model's)."""
        tensors = [outputs] if self.ctx.backend.is_tensor(outputs) else [
            o for o in (outputs if isinstance(outputs, (tuple, list)) else ())
            if self.ctx.backend.is_tensor(o)]
        return any(id(leaf) in self._mine for tensor in tensors
                   for leaf in self.ctx.kernels.graph_leaves(tensor))

    def on_forward(self, args, kwargs, grad_enabled):
        sample = self.ctx.sample
        if sample is None or not grad_enabled or self._reference is None:
            return
        dtype = self.ctx.kernels.autocast_dtype(self._reference)
        if dtype is not None:
            self._autocast = dtype
            if dtype == "float16":
                sample.loss_scaled = self.ctx.loss_scaling = True

    def on_step(self, loss):
        if self._scaler is not None:
            scale = self.ctx.kernels.loss_scale(self._scaler)
            if scale is not None:
                self._pending.append(float(scale) if self.ctx.backend.on_host(scale)
                                     else scale.detach().clone())
        return False

    def contribute(self):
        if self._error is not None:
            raise self._error
        entries, self._pending = self._pending, []
        if not entries:
            return
        tensors = [e for e in entries if not isinstance(e, float)]

        def receive(values):
            values = iter(values)
            self._scales.extend([e if isinstance(e, float) else next(values) for e in entries])
        self.ctx.collector.add(tensors, receive)

    def finish(self, sample):
        if sample.loss_scaled and sample.gradients and self._scaler is None:
            self._sampled.append((sample.step, sample.skipped))

    def state(self):
        if self._scaler is None and self._autocast is None and not self._found:
            return None
        return LossScaling(autocast=self._autocast, scaler=self._scaler is not None,
                           initial_scale=self._initial, scales=self._scales.values,
                           sampled=tuple(self._sampled), found=self._found)

    def signals(self):
        state = self.state()
        return () if state is None else (state,)

    def report_fields(self):
        state = self.state()
        return {"mixed_precision": state.summary() if state is not None else {}}

    def close(self):
        self._pending = []
        if self._listening:
            self._listening = False
            _PATCH.unlisten(self)


_LISTENERS = []       # the open probes seeking a scaler, each told of every scale() call
_INSTALLED = []       # (class, original, wrapper) while any probe listens


def _install():
    import torch

    owner = torch.amp.GradScaler
    original = owner.__dict__.get("scale")
    if not callable(original):
        return

    @functools.wraps(original)
    def scale(self, outputs):
        result = original(self, outputs)
        for listener in tuple(_LISTENERS):     # a copy: a Monitor may close meanwhile
            listener.scaled(self, result)
        return result
    owner.scale = scale
    _INSTALLED.append((owner, original, scale))


def _uninstall():
    """The original back, where the wrapper is still what is there."""
    while _INSTALLED:
        owner, original, wrapper = _INSTALLED.pop()
        if owner.__dict__.get("scale") is wrapper:
            owner.scale = original


_PATCH = SharedPatch(_LISTENERS, install=_install, uninstall=_uninstall)
