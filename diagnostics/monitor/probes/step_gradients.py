"""The per-step tier (opt-in, ``Monitor(per_step_gradients=True)``): the norm of every
parameter's ``.grad`` at every ``step``, so that a NaN/inf gradient or a one-step spike of the
gradient norm is reported at the step it happens, not at the next sampled step.

``step`` comes after ``optimizer.step()`` (and after ``scaler.step``/``scaler.update()``), when
``.grad`` holds what the optimizer applied, unscaled. One fused norm over the gradients per
step (``torch._foreach_norm``), brought to the host at once on a non-sampled step and with
the sampled step's one transfer otherwise. Its cost is printed by
``benchmarks/monitor_overhead.py``: about one more pass over the gradients per step.
"""
import math
import statistics
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..history import Series
from .base import Probe, Signal



@dataclass(frozen=True)
class StepGradients(Signal):
    """What the per-step check reads (``view.signal(StepGradients)``)."""

    steps: np.ndarray        # the steps whose norms were read
    norms: np.ndarray        # the total gradient norm at each of them
    latest: dict             # parameter name -> its gradient norm at the latest of them
    loss_scaling: bool       # inf/NaN gradients are a GradScaler's skipped steps


class StepGradientsProbe(Probe):
    publishes = (StepGradients,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._params = list(ctx.layout.trainable) if ctx.per_step_gradients else []
        self._steps, self._norms = Series(), Series()
        # the last finite norms, for spikes
        self._recent = deque(maxlen=ctx.thresholds.spike_history)
        self._latest = {}
        self._queued = None

    def on_step(self, loss):
        if not self._params:
            return False
        named = [(p.name, p.tensor.grad) for p in self._params if p.tensor.grad is not None]
        if not named:
            return False
        names = [name for name, _ in named]
        norms = self.ctx.kernels.gradient_norms([grad for _, grad in named])
        step = self.ctx.step
        if self.ctx.sample is not None:   # with the sampled step's one transfer
            self._queued = (step, names, norms)
            return False
        values = (norms.tolist() if self.ctx.backend.is_tensor(norms)
                  and self.ctx.backend.on_host(norms)
                  else self.ctx.kernels.gather([norms])[0])
        return self._record(step, names, values)

    def contribute(self):
        if self._queued is None:
            return
        step, names, norms = self._queued
        self._queued = None
        self.ctx.collector.add([norms], lambda parts: self._record(step, names, parts[0]))

    def _record(self, step, names, values):
        """Keep the step's norms; True when the check should run now (a NaN/inf gradient
        outside loss scaling, or a norm far above the recent median)."""
        if not isinstance(values, list):
            values = np.asarray(values, dtype=np.float64).reshape(-1).tolist()
        total = math.hypot(*values)   # float64, without squaring: no overflow
        self._steps.append(step)
        self._norms.append(total)
        self._latest = dict(zip(names, values))
        if not math.isfinite(total):
            return not self.ctx.loss_scaling
        recent = self._recent
        factor = self.ctx.thresholds.gradient_growth
        # the median only when the smallest recent norm leaves room for a spike (rarely)
        spike = (len(recent) >= self.ctx.thresholds.spike_min_history
                 and total > factor * min(recent)
                 and total > factor * statistics.median(recent))
        recent.append(total)
        return spike

    def signals(self):
        if not self._params or self._norms.values.size == 0:
            return ()
        return (StepGradients(
            steps=self._steps.values, norms=self._norms.values, latest=dict(self._latest),
            loss_scaling=self.ctx.loss_scaling),)

    def close(self):
        self._queued = None
