"""The model's output on sampled iterations: its width (classes) and prediction entropy.

Only for a loss that scores classes: when the loss's graph holds no softmax-family op (a
regression, BCE over independent outputs, a GAN's losses), the output's last axis is not a
class count and no uniform-guess level is read off it. A loss passed as a number says nothing,
and the output is read as before.

Which entry of a dict, tuple or dataclass output holds the logits follows the one rule of
``diagnostics.outputs`` (``Monitor(output=...)`` overrides it). Its loss-reads step needs the
loss: the Monitor sees the loss tensor, not the loss function, so it follows the loss's graph
back to the output entries it reaches first (``_entries_the_loss_reads``). The choice is made
at ``step(loss)`` and kept while the output keeps that entry.

The prediction entropy serves one check, LOSS_AT_CHANCE, which needs the loss within 5% of the
uniform guess ln C; it is measured only while the latest loss the host holds lies within
``ENTROPY_BAND`` of ln C (or none is known yet): a model that learns pays for it on its first
sample and no more.
"""
import math

from ... import outputs as output_rule
from .base import Probe

GRAPH_NODES_WALKED = 10_000   # the walk from the loss gives up (rule 5 applies) beyond this
ENTROPY_BAND = 0.5   # |loss - ln C| / ln C within which the entropy is measured (the check's
                     # own band is 0.05: a step's loss strays further from the level than that)


class OutputsProbe(Probe):

    def __init__(self, ctx):
        super().__init__(ctx)
        self._key = _UNRESOLVED   # where the logits are, once a loss has said so
        self._pending = None      # (sample, output) of this iteration's first training call
        self._classifies = None   # does the loss score classes (its graph, read once)?

    def attach(self):
        return [self.ctx.backend.add_forward_hook(self.ctx.backend.model, self._on_output)]

    def begin(self):
        self._pending = None

    def _on_output(self, module, args, output):
        ctx, sample = self.ctx, self.ctx.sample
        if sample is None or not ctx.backend.grad_enabled() or self._pending is not None:
            return None
        if self._key is not _UNRESOLVED and self._measure(sample, output, self._key):
            self._pending = (sample, None)
        else:
            self._pending = (sample, output)   # resolved at step(loss)
        return None

    def on_step(self, loss):
        if self._classifies is None:
            self._classifies = self.ctx.kernels.scores_classes(loss)
        pending, self._pending = self._pending, None
        if pending is None or pending[1] is None:
            return False
        sample, output = pending
        try:
            key = output_rule.select_key(
                self.ctx.backend, output, selector=self.ctx.output,
                reads=lambda: _entries_the_loss_reads(self.ctx.backend, output, loss))
        except LookupError:   # no floating tensor: nothing that looks like class scores
            return False
        if self._measure(sample, output, key):
            self._key = key
        return False

    def _measure(self, sample, output, key):
        """Queue the width and entropy of ``output``'s entry ``key``; False when it has none."""
        try:
            tensor = output_rule.pick(output, key)
        except (KeyError, IndexError, AttributeError, TypeError):
            return False
        if not self.ctx.backend.is_tensor(tensor):
            return False
        if len(tensor.shape) >= 2 and self._classifies is not False:
            sample.output_width = int(tensor.shape[-1])
            self._queue_entropy(sample, tensor)
        return True

    def _queue_entropy(self, sample, tensor):
        """The mean entropy of the output's softmax, when it looks like class scores (a
        floating output of C >= 2 columns): the first model call of the iteration only."""
        if sample.output_entropy is not None or not self._near_chance(tensor.shape[-1]):
            return
        entropy = self.ctx.kernels.prediction_entropy(tensor)
        if entropy is None:
            return
        sample.output_entropy = math.nan   # queued; the transfer fills it in

        def receive(parts):
            sample.output_entropy = float(parts[0])
        self.ctx.collector.add((entropy,), receive)

    def _near_chance(self, classes):
        """Whether the latest loss on the host is near ln C (or unknown, or not finite)."""
        losses = self.ctx.history.losses
        if not losses.size or classes < 2:
            return True
        latest, chance = float(losses[-1]), math.log(classes)
        return not math.isfinite(latest) or abs(latest - chance) <= ENTROPY_BAND * chance

    def close(self):
        self._pending = None


_UNRESOLVED = object()


def _entries_the_loss_reads(backend, output, loss):
    """The keys of ``output``'s tensor entries that the loss's graph reaches without passing
    through another entry (what ``loss_fn`` read directly); None when the loss has no graph."""
    nodes = {}
    for key, value in output_rule.entries(output):
        node = getattr(value, "grad_fn", None) if backend.is_tensor(value) else None
        if node is not None:
            nodes.setdefault(id(node), []).append(key)
    start = getattr(loss, "grad_fn", None)
    if start is None or not nodes:
        return None
    read, seen, stack = [], set(), [start]
    while stack and len(seen) < GRAPH_NODES_WALKED:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if id(node) in nodes:
            read += nodes[id(node)]
            continue   # an entry computed from another (logits from features) is not read
        stack.extend(backend.node_inputs(node))
    return read
