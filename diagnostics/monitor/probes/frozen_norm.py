"""Batch-norm layers whose parameters are frozen but whose running statistics keep moving.

``requires_grad_(False)`` on a pretrained part freezes its weights, not its batch norms: in
train mode each forward pass still folds the batch's mean and variance into the running ones,
so the frozen features drift from the statistics they were trained with, and ``model.eval()``
normalizes with the drifted ones. The signal needs no device work: the version counter of
``num_batches_tracked``, which a train-mode forward of torch's batch norm increments in place
each time it folds a batch into the running statistics (the kernel that updates the running
mean does not bump that buffer's counter), read on sampled steps, for the batch-norm layers
that hold parameters, all frozen, and track running statistics. A layer counts at a sampled
step when it is in train mode and it folded batches in since the previous sampled step; one
kept in eval mode (the fix) never does.
"""
from dataclasses import dataclass

from ..kinds import BATCHNORM
from .base import Probe, Signal


@dataclass(frozen=True)
class DriftingNorm:
    """One frozen batch-norm layer whose running statistics moved in train mode."""

    name: str
    type_name: str
    first_step: int       # the first sampled step it was seen moving
    steps: int            # sampled steps it was seen moving


@dataclass(frozen=True)
class FrozenNormDrift(Signal):
    """The frozen batch-norm layers seen updating their running statistics."""

    layers: tuple[DriftingNorm, ...]
    frozen: int           # frozen batch-norm layers watched


class FrozenNormProbe(Probe):

    publishes = (FrozenNormDrift,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._watched = [(layer.name, layer.type_name, layer.module)
                         for layer in ctx.layout.layers
                         if layer.kind == BATCHNORM and _frozen_and_tracking(layer.module)]
        self._last = {}       # name -> num_batches_tracked's version at the last sampled step
        self._moving = {}     # name -> [first step, steps]

    def on_sampled_step(self, loss):
        for name, _, module in self._watched:
            version = getattr(getattr(module, "num_batches_tracked", None), "_version", None)
            if version is None:
                continue
            last, self._last[name] = self._last.get(name), version
            if module.training and last is not None and version != last:
                seen = self._moving.setdefault(name, [self.ctx.step, 0])
                seen[1] += 1

    def signals(self):
        if not self._watched:
            return ()
        layers = tuple(DriftingNorm(name, type_name, *self._moving[name])
                       for name, type_name, _ in self._watched if name in self._moving)
        return (FrozenNormDrift(layers, len(self._watched)),)


def _frozen_and_tracking(module):
    params = list(module.parameters())
    return (bool(params) and not any(p.requires_grad for p in params)
            and getattr(module, "track_running_stats", False)
            and getattr(module, "running_mean", None) is not None)
