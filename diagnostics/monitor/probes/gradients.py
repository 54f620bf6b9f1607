"""The first gradient each parameter gets in a sampled iteration, what ``.grad`` already held
then, the norm over all parameters, and which weight rows get no gradient at all.

With a GradScaler (``Monitor(scaler=...)``) the gradients that backward brings are scaled:
their statistics are taken divided by the scale that backward used, as ``unscale_`` will
divide them, so they are the gradients the optimizer applies.

A parameter that multiplies (not a bias) and is all zeros at the first sampled backward (LoRA's
``B``, a zero-initialised head, ResNet's zero-init residual scale) makes the gradient of what
it multiplies zero, then in proportion to its size while it grows: its size at each sampled
backward (relative to a usual init: RMS times sqrt(fan-in) for a matrix) tells the
gradient-flow check why a layer before it gets so little."""
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..history import Series, gradient_columns
from ..records import GradientRecord
from ..units import UnitActivity
from .base import Probe, Signal


@dataclass(frozen=True)
class ZeroStarted(Signal):
    """Parameters that started at zero (LoRA's ``B``, a zero-initialised head or gain), by
    name: ``{sampled step: their size relative to a usual initialisation's}``."""

    sizes: Mapping[str, Mapping[int, float]]


class GradientsProbe(Probe):
    publishes = (ZeroStarted,)

    def __init__(self, ctx):
        super().__init__(ctx)
        layout = ctx.layout
        self.norms = Series()
        self.rows = UnitActivity(min(ctx.window, ctx.thresholds.dead_samples))
        self._per_unit = set(layout.unit_weights) | set(layout.unit_biases.values())
        self._columns = [(param, gradient_columns(param)) for param in layout.trainable]
        self._arrived = set()
        self._stale_open = set()  # names whose first gradient met a held .grad, not yet cleared
        self._unscale = None      # (1 / scale) of this iteration's backward, once known
        self._params = {p.name: (p.name, p.numel, p.name in self._per_unit)
                        for p in layout.trainable}
        self._queued = []         # (records, name, count) waiting for the transfer
        self._results = []        # their statistics, three each, in the same order
        self._zero_started = None  # name -> (param, its natural-scale factor), once known
        self.cofactors = {}       # name -> {step: its size, relative to a usual init's}

    def attach(self):
        backend = self.ctx.backend
        return [backend.add_tensor_hook(param.tensor, self._hook(param))
                for param in self.ctx.layout.trainable]

    def begin(self):
        self._arrived = set()
        self._stale_open = set()
        self._unscale = None

    def _hook(self, param):
        def hook(grad):
            sample = self.ctx.sample
            if sample is None:
                return None
            if param.name not in self._arrived:
                if not self._arrived:
                    if self.ctx.scaler is not None:
                        self._unscale = self._inverse_scale(sample)
                    self._measure_cofactors(sample)
                self._arrived.add(param.name)
                self._receive(sample, param, grad)
            elif param.tensor.grad is None:    # emptied by zero_grad since its first gradient
                self._restart(sample, param, grad)
            elif param.name in self._stale_open:
                self._recheck(sample, param)
            return None
        return hook

    def on_sampled_step(self, loss):
        """No parameter got a gradient, though the loss has an autograd graph: whether backward
        ran on it (its saved tensors freed) tells a graph cut between the model and the loss
        from a missing ``loss.backward()``."""
        if self._arrived or not self._params:
            return
        if self.ctx.backend.is_tensor(loss) and getattr(loss, "grad_fn", None) is not None:
            alive = self.ctx.kernels.graph_buffers_alive(loss)
            self.ctx.sample.cut_from_loss = {False: "backward ran", True: "no backward"}.get(
                alive, "unknown")

    def _restart(self, sample, param, grad):
        """``zero_grad(set_to_none=True)`` between two backward passes of one iteration (a GAN's
        discriminator, zeroed after the generator's backward ran through it): what came before
        never reaches an optimizer step, so this gradient is the parameter's record (it
        replaces the first at the transfer) and nothing held is stale."""
        self._stale_open.discard(param.name)
        sample.stale_cleared.add(param.name)
        self._receive(sample, param, grad)

    def _recheck(self, sample, param):
        """A later gradient in the iteration of a parameter whose first one met a held .grad,
        ``.grad`` not emptied since: if ``zero_grad(set_to_none=False)`` filled it with zeros,
        what was held never reached an optimizer step: not stale."""
        previous = param.tensor.grad
        name = param.name
        largest = self.ctx.kernels.gradient_statistics(previous)[2]   # zeroed in place?

        def receive(parts):
            if parts[0] == 0:
                sample.stale_cleared.add(name)
        self.ctx.collector.add([largest], receive)

    def _measure_cofactors(self, sample):
        """The size of each zero-started parameter as this backward uses it (no optimizer has
        stepped yet): the gradient of what it multiplies is in proportion to it."""
        if self._zero_started is None:
            self._find_zero_started(sample)
            return
        if not self._zero_started:
            return
        names = list(self._zero_started)
        squares = [self.ctx.kernels.gradient_statistics(self._zero_started[n][0].tensor)[0]
                   for n in names]

        def receive(parts):
            for name, total in zip(names, parts):
                param, factor = self._zero_started[name]
                size = math.sqrt(max(total, 0.0) / max(param.numel, 1)) * factor
                self.cofactors.setdefault(name, {})[sample.step] = size
                if len(self.cofactors[name]) > 4 * self.ctx.window:
                    self.cofactors[name].pop(next(iter(self.cofactors[name])))
        self.ctx.collector.add(squares, receive)

    def _find_zero_started(self, sample):
        """At the first sampled backward: the trainable parameters that are not biases and are
        all zeros, read with that sample's transfer (``factor`` turns an RMS into a size
        relative to a usual init: 1 for a gain or a scalar gate, sqrt(fan-in) for a matrix)."""
        params = [p for p in self.ctx.layout.trainable
                  if p.name.rpartition(".")[2] != "bias" and p.numel > 0]
        self._zero_started = {}
        largest = [self.ctx.kernels.gradient_statistics(p.tensor)[2] for p in params]

        def receive(parts):
            for param, value in zip(params, parts):
                if value == 0:
                    factor = math.sqrt(math.prod(param.shape[1:])) if param.is_weight else 1.0
                    self._zero_started[param.name] = (param, factor)
                    self.cofactors[param.name] = {sample.step: 0.0}
        if params:
            self.ctx.collector.add(largest, receive)

    def _inverse_scale(self, sample):
        """1 / the GradScaler's scale now, during backward (what ``scale(loss)`` multiplied
        by), computed as ``unscale_`` does; the scale itself is read at the sample's transfer."""
        scale = self.ctx.kernels.loss_scale(self.ctx.scaler)
        if scale is None:
            return None
        sample.loss_scaled = True
        scale = scale.detach().clone()
        self.ctx.collector.add([scale], lambda parts: setattr(sample, "loss_scale", parts[0]))
        return scale.double().reciprocal().float()

    def _receive(self, sample, param, grad):
        """Queue the gradient's statistics, and those of what ``.grad`` already held."""
        name, count, per_unit = self._params[param.name]
        stats = self.ctx.kernels.gradient_statistics
        self._queued.append((sample.gradients, name, count))
        self._results += stats(grad, per_unit=per_unit, inv_scale=self._unscale)
        previous = param.tensor.grad
        if previous is not None:
            self._queued.append((sample.stale, name, count))
            self._results += stats(previous)
            self._stale_open.add(name)

    def contribute(self):
        """The queued statistics, all in one entry of the transfer (three results each)."""
        queued, results = self._queued, self._results
        if not queued:
            return
        self._queued, self._results = [], []

        def receive(parts):
            for i, (records, name, count) in enumerate(queued):
                records[name] = GradientRecord.from_parts(count, parts[3 * i:3 * i + 3])
        self.ctx.collector.add(results, receive)

    def finish(self, sample):
        self.norms.append(sample.gradient_norm)
        self._note_unit_gradients(sample)

    def _note_unit_gradients(self, sample):
        """Per output unit of each Linear/Conv layer: the largest |gradient| its weight row and
        bias entry got. A row of zeros alone may mean a zero input, so a layer without a bias
        counts only when some row got a gradient."""
        if not sample.gradient_norm > 0:     # a loss of exactly 0 tells nothing
            return
        layout = self.ctx.layout
        for name in layout.unit_weights:
            weight = sample.gradients.get(name)
            bias = sample.gradients.get(layout.unit_biases.get(name))
            if weight is None or weight.row_max is None or not weight.finite:
                continue
            if bias is not None and bias.row_max is not None and bias.finite:
                magnitude = np.maximum(weight.row_max, bias.row_max)
            elif weight.abs_max > 0:
                magnitude = weight.row_max
            else:
                continue
            self.rows.add_magnitude(name, magnitude, sample.batch or 0)

    def view_fields(self):
        return {"gradient_norms": self.norms.values, "gradient_rows": self.rows}

    def signals(self):
        return (ZeroStarted({name: dict(sizes) for name, sizes in self.cofactors.items()}),)

    def fill_row(self, row, sample, view):
        row["gradient_norm"] = sample.gradient_norm
        for param, columns in self._columns:
            grad = sample.gradients.get(param.name)
            if grad is not None:
                row.update(zip(columns, (grad.norm, grad.abs_mean, grad.abs_max)))

    def close(self):
        self._arrived, self._stale_open = set(), set()
        self._queued, self._results = [], []

