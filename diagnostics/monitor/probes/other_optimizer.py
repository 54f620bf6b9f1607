"""Tensors that another optimizer trains: a loss that is a moving target.

A GAN's generator loss runs through the discriminator, whose parameters the generator's
optimizer does not hold; the discriminator's loss is measured on what the generator makes.
Either way the loss depends on a player that this optimizer does not control, and that player
keeps changing: the loss's level, trend and swings are the game's, not a measure of this
optimizer's progress (``checks/loss.py`` does not judge its shape then).

Only with an optimizer. On sampled steps a sample of the values of each tensor that requires
grad, that this optimizer does not hold, and that is a parameter of the model, a leaf of the
loss's graph (``kernels.graph_leaves``) or a leaf of the graph of an input the model was
called on (a discriminator watched alone sees the generator so, when it scores G(z) in the
generator's step) is compared with its sample at the previous sampled step. One that changed
at ``Thresholds.moving_target_changes`` comparisons or more, the last of them within the loss
checks' window (``Thresholds.loss_window`` steps), is trained elsewhere: another optimizer
steps it (every step, or every few: a critic trained five times per generator step). A frozen
part (a backbone outside the optimizer, a fixed teacher, layers kept in a plain list) never
changes, and is no longer sampled once it stayed unchanged that long; a new tensor per batch
is never compared twice; a tensor edited once by hand changes once: none of them counts.
"""
import weakref
from dataclasses import dataclass

import numpy as np

from ..layout import optimizer_parameter_ids
from .base import Probe, Signal, floating

_WATCHED = 32   # tensors followed at once (those found frozen not counted)


@dataclass(frozen=True)
class TrainedElsewhere(Signal):
    """Tensors the loss depends on that another optimizer keeps changing, by name (a
    parameter's, else "a tensor of shape AxB"): the loss is a moving target."""

    names: tuple[str, ...]


class _Followed:
    """One tensor outside the optimizer, followed across sampled steps by weak reference."""

    def __init__(self, tensor, name, step):
        self.ref = weakref.ref(tensor)
        self.name = name
        self.first_step = step
        self.values = None        # the sample of its values at the last sighting
        self.changes = 0          # comparisons at which its values had changed
        self.last_change = None   # the step of the latest
        self.frozen = False       # unchanged for a whole loss window: no longer sampled

    def moving(self, step, window, changes):
        return (self.changes >= changes and step - self.last_change <= window
                and self.ref() is not None)


class OtherOptimizerProbe(Probe):
    publishes = (TrainedElsewhere,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._active = ctx.optimizer is not None
        self._names = {id(p.tensor): p.name for p in ctx.layout.params}
        self._followed = {}       # id -> _Followed
        self._queued = []         # (_Followed, step, sample of its values) for the transfer
        self._input_leaves = []   # leaves of a model input's graph, until the next sample
        self._look = True         # an input made by a graph not yet walked since the last sample
        self._found = None        # what signals gives once closed

    def on_forward(self, args, kwargs, grad_enabled):
        """The first input of the period that carries a graph (a discriminator called on
        G(z) in the generator's step) has its leaves kept: one walk per sampled step."""
        if not (self._active and self._look and grad_enabled):
            return
        for value in (*args, *kwargs.values()):
            if getattr(value, "grad_fn", None) is not None and self.ctx.backend.is_tensor(value):
                self._look = False
                self._input_leaves = self.ctx.kernels.graph_leaves(value)
                return

    def on_sampled_step(self, loss):
        ctx = self.ctx
        if not self._active:
            return
        held = optimizer_parameter_ids(ctx.optimizer)
        tensors = [p.tensor for p in ctx.layout.trainable] + self._input_leaves
        if ctx.backend.is_tensor(loss) and getattr(loss, "grad_fn", None) is not None:
            tensors += ctx.kernels.graph_leaves(loss, walk=ctx.loss_walk(loss))
        self._input_leaves, self._look = [], True
        for tensor in tensors:
            if id(tensor) not in held and floating(tensor):
                self._follow(id(tensor), tensor)
        for key, entry in self._followed.items():
            tensor = entry.ref()
            if tensor is not None and not entry.frozen and key not in held:
                self._queued.append((entry, ctx.step, ctx.kernels.weight_sample(tensor)))

    def _follow(self, key, tensor):
        entry = self._followed.get(key)
        if entry is not None and entry.ref() is tensor:
            return entry
        if sum(not e.frozen for e in self._followed.values()) >= _WATCHED:
            self._followed = {k: e for k, e in self._followed.items() if e.ref() is not None}
            if sum(not e.frozen for e in self._followed.values()) >= _WATCHED:
                return None
        name = self._names.get(key) or f"a tensor of shape {_shape(tensor.shape)}"
        entry = self._followed[key] = _Followed(tensor, name, self.ctx.step)
        return entry

    def contribute(self):
        queued, self._queued = self._queued, []
        window = self.ctx.thresholds.loss_window
        for entry, step, sample in queued:
            self.ctx.collector.add((sample,), lambda parts, entry=entry, step=step:
                                   _sighted(entry, step, parts[0], window))

    def signals(self):
        found = self._found if self._found is not None else self._moving()
        return (TrainedElsewhere(tuple(found)),)

    def _moving(self):
        step, thresholds = self.ctx.step, self.ctx.thresholds
        window, changes = thresholds.loss_window, thresholds.moving_target_changes
        return [e.name for e in self._followed.values() if e.moving(step, window, changes)]

    def close(self):
        """Keep what was found for ``report()``; drop the references and samples."""
        self._found = self._moving() if self._found is None else self._found
        self._followed, self._queued, self._input_leaves = {}, [], []


def _sighted(entry, step, values, window):
    values = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if entry.values is not None and not np.array_equal(values, entry.values, equal_nan=True):
        entry.changes += 1
        entry.last_change = step
    entry.values = values
    if entry.changes == 0 and step - entry.first_step > window:
        entry.frozen, entry.values = True, None



def _shape(shape):
    return "x".join(str(size) for size in shape) if len(shape) else "scalar"
