"""Mixed precision: the dtype autocast computes in, a GradScaler's scale after every step, and
the steps it skipped.

A GradScaler multiplies the loss by its scale before backward, skips the optimizer step when
a gradient came out inf or NaN, and halves the scale: a few skipped steps while it finds its
scale are normal. With the scaler (``Monitor(scaler=...)``) the scale is read after every step
(``step`` after ``scaler.update()``): a step whose scale fell was skipped. Without it, fp16
autocast seen in a sampled forward marks that iteration's gradients as scaled by an unknown
factor, and a sampled step whose gradients hold inf or NaN counts as skipped.
"""
import math
from dataclasses import dataclass

import numpy as np

from ..history import Series
from .base import Probe


@dataclass(frozen=True)
class LossScaling:
    """What the mixed-precision check reads (``view.signals["mixed_precision"]``)."""

    autocast: str | None       # the dtype autocast computed in ("float16", "bfloat16"), if seen
    scaler: bool               # the Monitor was given an enabled GradScaler
    initial_scale: float       # the scale before the first recorded step (nan without scaler)
    scales: np.ndarray         # the scale after each recorded step (with a scaler)
    sampled: tuple = ()        # (step, skipped) of loss-scaled sampled steps, without scaler

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
        return " + ".join(parts)

    def summary(self):
        """The report's line: the kind, the scale now and its lowest, the skipped steps."""
        if self.scaler and self.scales.size:
            return {"kind": self.kind, "scale": float(self.scales[-1]),
                    "lowest_scale": float(self.scales.min()),
                    "skipped_steps": int(self.skipped.sum()),
                    "counted_steps": int(self.scales.size)}
        summary = {"kind": self.kind}
        if self.sampled:
            summary.update(skipped_steps=sum(skipped for _, skipped in self.sampled),
                           counted_steps=len(self.sampled))
        return summary


class MixedPrecisionProbe(Probe):

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
        if self._scaler is None and self._autocast is None:
            return None
        return LossScaling(autocast=self._autocast, scaler=self._scaler is not None,
                           initial_scale=self._initial, scales=self._scales.values,
                           sampled=tuple(self._sampled))

    def view_fields(self):
        state = self.state()
        return {} if state is None else {"signals": {"mixed_precision": state}}

    def report_fields(self):
        state = self.state()
        return {"mixed_precision": state.summary() if state is not None else {}}

    def close(self):
        self._pending = []
