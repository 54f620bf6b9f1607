"""How far the trainable weights travel across the window the loss checks judge.

A level loss is a stall when the weights are stalled too: a learning rate far too small moves
them by a tiny share of their size, a dead or frozen network by nothing, and minibatch noise
around a point goes nowhere. A loss made of terms that trade off (a VAE's reconstruction
falling while its KL term rises as the encoder starts to use its latents) stays level while
the weights travel far: the model at the end of the window is another model, and the level
loss says that the terms balance, not that training stopped (LOSS_PLATEAU reads this).

At the start of each sampled iteration (the weights as the last optimizer step left them):
the distance from the earliest mark inside the window to the weights now, over the entries
``weight_sample`` takes, each parameter's sums scaled up by its size over its sample's so
that a large tensor weighs as much as its values; and, once per half of the loss window, a
new mark. Marks the window has passed are dropped, so at most three copies are held.
"""
import math
from dataclasses import dataclass

from .base import Probe, Signal


@dataclass(frozen=True)
class WeightTravel(Signal):
    """The trainable weights' move between two steps, relative to their size."""

    since: int      # the mark: the weights after this many steps
    until: int      # compared with the weights after this many steps
    ratio: float    # |w(until) - w(since)| / |w(until)|, all trainable parameters together


@dataclass(frozen=True)
class _Mark:
    step: int
    copies: tuple   # weight_samples of the trainable parameters
    key: tuple      # their (shape, device, dtype): a mark of other tensors is no mark


class TravelProbe(Probe):

    publishes = (WeightTravel,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._params = list(ctx.layout.trainable)
        self._marks = []
        self._pending = None    # (mark, until, the kernels' results) until the transfer
        self._travel = None

    def begin(self):
        ctx = self.ctx
        if not self._params or ctx.history is None:
            return
        step = ctx.step                          # optimizer steps taken so far
        window = ctx.thresholds.loss_window_steps(step + 1)
        tensors = [p.tensor for p in self._params]
        key = tuple((tuple(t.shape), str(getattr(t, "device", "")), str(t.dtype))
                    for t in tensors)
        # the window's first step started from the weights after ``step - window`` steps
        self._marks = [m for m in self._marks if m.step >= step - window and m.key == key]
        kernels = ctx.kernels
        if self._marks and self._marks[0].step < step:
            mark = self._marks[0]
            self._pending = (mark, step, kernels.travel_statistics(tensors, list(mark.copies)))
        if not self._marks or step - self._marks[-1].step >= max(window // 2, 1):
            self._marks.append(_Mark(step, tuple(kernels.weight_samples(tensors)), key))

    def contribute(self):
        if self._pending is None:
            return
        (mark, until, results), self._pending = self._pending, None
        self.ctx.collector.add(results, lambda parts: self._receive(mark, until, parts))

    def _receive(self, mark, until, parts):
        count = len(self._params)
        moved = size = 0.0
        for param, copy, delta, weight in zip(self._params, mark.copies, parts[:count],
                                              parts[count:]):
            scale = param.numel / max(math.prod(copy.shape), 1)
            moved += scale * float(delta) ** 2
            size += scale * float(weight) ** 2
        ratio = math.sqrt(moved / size) if size > 0 else math.nan
        self._travel = WeightTravel(since=mark.step, until=until, ratio=ratio)

    def signals(self):
        return (self._travel,) if self._travel is not None else ()

    def close(self):
        self._marks, self._pending = [], None
