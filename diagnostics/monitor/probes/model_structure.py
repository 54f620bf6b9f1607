"""The module tree's structural mistakes (``diagnostics.model_structure``), read once, at the
model's first call (a momentum set after the Monitor was made is seen): no device work.

A module class defining ``backward`` is found off the tree too; on torch the probe then hooks
those modules until one call tells whether the gradient autograd passes back through them is
missing or reversed against their ``backward`` (``backward_disagreement``), and drops them when
it goes the declared way or when no call can tell (a module on the model's input: the gradient
it would return goes nowhere).
"""
from dataclasses import dataclass, replace

from ...model_structure import (IgnoredBackward, InvertedMomentum, ReusedModule,
                                backward_disagreement, ignored_backwards, inverted_momenta,
                                reused_modules)
from .base import Probe, Signal

TRIES = 3   # calls of a module with its own backward before it is judged unverifiable


@dataclass(frozen=True)
class ModelStructure(Signal):
    """What ``checks.model_structure`` reads."""

    reused: tuple[ReusedModule, ...]
    inverted_momenta: tuple[InvertedMomentum, ...]
    ignored_backwards: tuple[IgnoredBackward, ...] = ()


class ModelStructureProbe(Probe):

    publishes = (ModelStructure,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._structure = None
        self._confirmed = []      # IgnoredBackward whose backward disagrees with autograd
        self._pending = {}        # module name -> [IgnoredBackward, tries left, hook handle]

    def on_forward(self, args, kwargs, grad_enabled):
        if self._structure is not None:
            return
        model = self.ctx.backend.model
        self._structure = ModelStructure(tuple(reused_modules(model)),
                                         tuple(inverted_momenta(model)))
        ignored = ignored_backwards(model)
        if self.ctx.backend.name != "torch":
            self._confirmed = ignored           # no autograd.grad to ask: the class says it
            return
        modules = dict(model.named_modules())
        for found in ignored:
            module = modules.get(found.name, model if not found.name else None)
            if module is not None:
                handle = self.ctx.backend.add_forward_hook(module, self._judging(found.name))
                self._pending[found.name] = [found, TRIES, handle]

    def _judging(self, name):
        def hook(module, inputs, output):
            entry = self._pending.get(name)
            if entry is None or not self.ctx.backend.grad_enabled():
                return
            found, tries, handle = entry
            try:
                disagreement = backward_disagreement(module, inputs, output)
            except Exception:   # noqa: BLE001 - LookupError, or the user's backward raised
                if tries > 1:
                    entry[1] = tries - 1
                    return
                disagreement = None               # no call can tell: not judged
            if disagreement is not None:
                self._confirmed.append(replace(found, disagreement=disagreement))
            del self._pending[name]
            handle.remove()
        return hook

    def signals(self):
        if self._structure is None:
            return ()
        return (replace(self._structure, ignored_backwards=tuple(self._confirmed)),)

    def close(self):
        for _, _, handle in self._pending.values():
            handle.remove()
        self._pending = {}
