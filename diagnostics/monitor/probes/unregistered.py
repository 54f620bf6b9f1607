"""Tensors that receive gradients but that neither the model nor the optimizer holds, and that
never change: layers kept in a plain Python list or dict, which ``parameters()`` misses.

On sampled steps the loss's graph is walked (``kernels.graph_leaves``, bounded) for leaf
tensors that require grad; those that are not the model's parameters, not in the optimizer
and not the model's inputs are followed by weak reference, with a sample of their values
taken in the step's one transfer. The same tensor seen unchanged at several sampled steps is
what an unregistered layer looks like; a new tensor per batch (an input with
``requires_grad``) or one the user updates by hand is not.
"""
import weakref
from dataclasses import dataclass

import numpy as np

from ..layout import optimizer_parameter_ids
from .base import Probe, Signal, floating

_WATCHED = 32   # outside tensors followed at once


@dataclass(frozen=True)
class UnchangedTensor:
    """A leaf tensor outside the model and the optimizer whose values stayed the same."""

    shape: tuple[int, ...]
    first_step: int           # the sampled steps it was first and last seen at
    last_step: int
    sightings: int            # sampled steps at which its values were the same


@dataclass(frozen=True)
class UnregisteredParameters(Signal):
    """The tensors with gradients that neither the model nor the optimizer holds, seen
    unchanged at ``Thresholds.unregistered_sightings`` sampled steps or more."""

    found: tuple[UnchangedTensor, ...]


class _Outside:
    """One leaf tensor outside the model and the optimizer, followed across sampled steps."""

    def __init__(self, tensor, step):
        self.ref = weakref.ref(tensor)
        self.shape = tuple(tensor.shape)
        self.first_step = self.last_step = step
        self.values = None        # the sample of its values at the last sighting
        self.sightings = 0        # sampled steps at which its values were the same
        self.changed = False      # its values changed once: updated by someone, not reported


class UnregisteredProbe(Probe):
    publishes = (UnregisteredParameters,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._known = {id(p.tensor) for p in ctx.layout.params}   # held by the layout
        self._inputs = set()      # ids of the tensors given to the model this iteration
        self._outside = {}        # id -> _Outside
        self._queued = []         # (_Outside, step, sample of its values) for the transfer
        self._found = None        # what signals gives once closed

    def attach(self):
        backend = self.ctx.backend
        return [backend.add_forward_pre_hook(backend.model, self._on_call, with_kwargs=True)]

    def begin(self):
        self._inputs = set()

    def _on_call(self, module, args, kwargs):
        is_tensor = self.ctx.backend.is_tensor
        for value in (*args, *kwargs.values()):
            if isinstance(value, dict):
                value = tuple(value.values())
            for item in (value if isinstance(value, (tuple, list)) else (value,)):
                if is_tensor(item):
                    self._inputs.add(id(item))

    def on_sampled_step(self, loss):
        ctx = self.ctx
        if not ctx.backend.is_tensor(loss) or getattr(loss, "grad_fn", None) is None:
            return
        outside = [t for t in ctx.kernels.graph_leaves(loss, walk=ctx.loss_walk(loss))
                   if id(t) not in self._known and id(t) not in self._inputs]
        if outside:
            held = self._held_now()
            outside = [t for t in outside if id(t) not in held and floating(t)]
        for tensor in outside:
            entry = self._follow(tensor)
            if entry is not None and not entry.changed:
                self._queued.append((entry, ctx.step, ctx.kernels.weight_sample(tensor)))

    def _held_now(self):
        """Ids of the model's parameters and buffers and the optimizer's parameters, as they
        are now (a module or a parameter group added after the Monitor was built)."""
        backend = self.ctx.backend
        held = {id(t) for _, t in (*backend.named_parameters(), *backend.named_buffers())}
        return held | (optimizer_parameter_ids(self.ctx.optimizer) or set())

    def _follow(self, tensor):
        entry = self._outside.get(id(tensor))
        if entry is not None and entry.ref() is tensor:
            return entry
        if len(self._outside) >= _WATCHED:
            self._outside = {k: e for k, e in self._outside.items() if e.ref() is not None}
            if len(self._outside) >= _WATCHED:
                return None
        entry = self._outside[id(tensor)] = _Outside(tensor, self.ctx.step)
        return entry

    def contribute(self):
        queued, self._queued = self._queued, []
        for entry, step, sample in queued:
            self.ctx.collector.add((sample,), lambda parts, entry=entry, step=step:
                                   _sighted(entry, step, parts[0]))

    def signals(self):
        found = self._unchanged() if self._found is None else self._found
        return (UnregisteredParameters(found),)

    def _unchanged(self):
        sightings = self.ctx.thresholds.unregistered_sightings
        return tuple(UnchangedTensor(e.shape, e.first_step, e.last_step, e.sightings)
                     for e in self._outside.values()
                     if not e.changed and e.sightings >= sightings and e.ref() is not None)

    def close(self):
        """Keep what was found for ``report()``; drop the references and samples."""
        self._found = self._unchanged()
        self._outside, self._queued, self._inputs = {}, [], set()


def _sighted(entry, step, values):
    values = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if entry.values is not None and not np.array_equal(values, entry.values, equal_nan=True):
        entry.changed, entry.values = True, None
        return
    entry.values, entry.last_step = values, step
    entry.sightings += 1

