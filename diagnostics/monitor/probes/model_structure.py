"""The module tree's structural mistakes (``diagnostics.model_structure``), read once, at the
model's first call (a momentum set after the Monitor was made is seen): no hooks, no device
work."""
from dataclasses import dataclass

from ...model_structure import (InvertedMomentum, ReusedModule, inverted_momenta,
                                reused_modules)
from .base import Probe, Signal


@dataclass(frozen=True)
class ModelStructure(Signal):
    """What ``checks.model_structure`` reads."""

    reused: tuple[ReusedModule, ...]
    inverted_momenta: tuple[InvertedMomentum, ...]


class ModelStructureProbe(Probe):

    publishes = (ModelStructure,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._structure = None

    def on_forward(self, args, kwargs, grad_enabled):
        if self._structure is None:
            model = self.ctx.backend.model
            self._structure = ModelStructure(tuple(reused_modules(model)),
                                             tuple(inverted_momenta(model)))

    def signals(self):
        return () if self._structure is None else (self._structure,)
