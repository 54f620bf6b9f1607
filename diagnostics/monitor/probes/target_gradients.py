"""Targets that carry gradient: what a loss function got as its ``target``.

Torch's losses document ``target`` as the ground truth the input is scored against. A target
computed by the trained network without ``torch.no_grad()`` or ``.detach()`` (a DQN's TD
target ``r + gamma * q_net(s').max(1)[0]`` from the online net, a pseudo-label passed as a soft
target) also moves: back-propagation pulls the target towards the prediction as much as the
prediction towards it, and the fixed point is no longer the one the loss was written for.

While a Monitor with a torch model is open, the losses of ``probes/loss_calls.py`` are seen (one
shared patch); on a sampled iteration a call whose target has a graph, as has its input, is
read there (both graphs are alive then): ``kernels.graph_sides`` splits the two graphs into
what they share and what each computes on its own. It is noted when the target's own
computation reaches parameters the stepping optimizer holds (or, without an optimizer, the
model's trainable ones) that the input's graph reaches too: the same weights evaluated a
second time to make the target. Two cases stay quiet by mechanism:

- both sides computed alike (their own ops the same, value-preserving ones aside): a siamese
  ``mse_loss(f(a), f(b))`` or a Pi-model consistency ``mse_loss(f(aug1(x)), f(aug2(x)))`` puts
  one of two symmetric predictions in the ``target`` slot; neither is a ground truth, and
  training both is the design;
- a target made from the input's own computation only (a transform of the same output, an
  entropy-style objective): its parameters are reached through the node both sides share.

A call is kept only when its result is part of the loss given to ``Monitor.step`` (its graph
node lies in the loss's graph): a loss computed for logging is not what trains.
"""
from collections import deque
from dataclasses import dataclass

from ..layout import optimizer_parameter_ids
from .base import Probe, Signal
from .loss_calls import LOSS_CALLS, argument

_CALLS_READ = 4      # loss calls read per sampled iteration (each walks two graphs)
_NAMED = 3           # parameters named per record


@dataclass(frozen=True)
class TargetGradientRecord:
    """One sampled step's loss call whose target's own computation reached trained
    parameters that its input's graph reaches too."""

    step: int
    function: str
    parameters: tuple[str, ...]   # the first few, by name
    count: int                    # how many such parameters
    target_ops: tuple[str, ...]   # ops of the target's own computation (most frequent first)


@dataclass(frozen=True)
class TargetGradients(Signal):
    """The window's records of targets that carry gradient into trained parameters."""

    records: tuple[TargetGradientRecord, ...]


class TargetGradientsProbe(Probe):

    publishes = (TargetGradients,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._records = deque(maxlen=4 * ctx.window)
        self._pending = []      # (graph node of the call's result, record) of this iteration
        self._read = 0
        self._listening = False
        self._names = {id(p.tensor): p.name for p in ctx.layout.params}

    def begin(self):
        self._pending, self._read = [], 0
        if self.ctx.backend.name == "torch" and not self._listening:
            LOSS_CALLS.listen(self)
            self._listening = True

    def loss_called(self, function, args, kwargs, result):
        """A loss function returned (told by the shared patch): read it on sampled iterations."""
        ctx = self.ctx
        if ctx.sample is None or self._read >= _CALLS_READ:
            return
        target = argument(args, kwargs, 1, "target")
        prediction = argument(args, kwargs, 0, "input")
        node = getattr(result, "grad_fn", None)
        if (node is None or getattr(target, "grad_fn", None) is None
                or getattr(prediction, "grad_fn", None) is None):
            return
        self._read += 1
        sides = ctx.kernels.graph_sides(prediction, target)
        if sides is None:
            return
        mine, theirs = sides.second, sides.first
        if dict(mine.ops) == dict(theirs.ops):      # symmetric: two predictions compared
            return
        trained = self._trained_ids()
        reached = {id(leaf) for leaf in theirs.leaves}
        found = [leaf for leaf in mine.own_leaves if id(leaf) in trained and id(leaf) in reached]
        if not found:
            return
        names = tuple(self._names.get(id(leaf), f"a tensor of shape {_shape(leaf.shape)}")
                      for leaf in found[:_NAMED])
        ops = tuple(op for op, _ in sorted(mine.ops.items(), key=lambda kv: -kv[1])[:6])
        self._pending.append((node, TargetGradientRecord(ctx.step, function, names, len(found),
                                                         ops)))

    def _trained_ids(self):
        held = optimizer_parameter_ids(self.ctx.optimizer)
        if held is not None:
            return held
        return {id(p.tensor) for p in self.ctx.layout.trainable}

    def on_sampled_step(self, loss):
        pending, self._pending = self._pending, []
        if not pending or getattr(loss, "grad_fn", None) is None:
            return
        walk = self.ctx.loss_walk(loss)
        in_loss = {id(node) for node, _, _ in walk.nodes}
        self._records.extend(record for node, record in pending if id(node) in in_loss)

    def signals(self):
        return (TargetGradients(tuple(self._records)),)

    def close(self):
        self._pending = []
        if self._listening:
            self._listening = False
            LOSS_CALLS.unlisten(self)


def _shape(shape):
    return "x".join(str(size) for size in shape) if len(shape) else "scalar"
