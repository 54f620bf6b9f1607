"""Outputs that are probabilities, and the loss's gradient on them (softmax before a loss that
applies its own log-softmax).

On a sampled iteration, the first model call with gradients: the smallest entry and the row
sums of the output along its class axis (axis 1, and the last axis of an output with more
dimensions), and, from a hook on the output tensor, how well the loss's gradient on it fits
that of cross-entropy taking it as logits: ``k * (softmax(output) - one_hot)`` per row. Only
that loss has that gradient (NLL on log-probabilities, squared error or a Brier score on
probabilities do not), so the two together say that probabilities went into
``nn.CrossEntropyLoss``; a gradient that picks one entry per row (``-k * one_hot``) says that
they went into ``nn.NLLLoss``. The tensor hook is removed when the sample completes.

The gradient's fit means something only for rows on the simplex, so it is measured only while
the latest sample the host has seen was on it (and on the first); and an output off the simplex
(logits, the common case) is measured again only every ``SIMPLEX_RECHECK``-th sampled step: a
model's output does not turn from logits into probabilities between steps. An output of logits
then costs nothing on most sampled steps (at ``every=1`` the fit alone was a fifth of the
Monitor's time on an MLP). Reading the latest record adds no transfer.

From the structure, when ``step`` gets the loss tensor: the loss's autograd graph, walked on
sampled steps, where a sigmoid's output reaches BCE with logits, or a softmax's output reaches
cross-entropy's log-softmax, through reshapes and casts only (``kernels.squashed_twice``). That
says it with no number to interpret; forward hooks on the ``Sigmoid`` and ``Softmax`` modules
name the module whose output it was.
"""
from collections import deque
from dataclasses import dataclass


from .base import Probe, Signal, floating

SIMPLEX_TOLERANCE = 2e-3   # |row sum - 1| and -min(entry) of a float16 softmax stay below this
SIMPLEX_RECHECK = 10       # an output off the simplex is measured again this many samples on


@dataclass(frozen=True)
class ProbabilityRecord:
    """One sampled step, one class axis: the output's simplex numbers and the gradient's fit."""

    step: int
    axis: int
    classes: int
    smallest: float          # the smallest output entry
    sum_error: float         # the largest |row sum - 1|
    misfit: float | None     # None when no gradient reached the output
    rows: int                # rows whose gradient has the cross-entropy sign pattern
    spread: float | None     # of the gradient's scale k over those rows (0: one scale)
    pick_misfit: float | None = None   # off a gradient that picks one entry per row (NLL)
    pick_rows: int = 0                 # rows with a negative gradient entry

    @property
    def on_simplex(self):
        """Entries >= 0 and rows summing to 1, to within float16's rounding of a softmax."""
        return self.smallest >= -SIMPLEX_TOLERANCE and self.sum_error <= SIMPLEX_TOLERANCE


@dataclass(frozen=True)
class SquashedTwiceRecord:
    """One sampled step's loss graph: a sigmoid or softmax fed to a loss that applies its own."""

    step: int
    kind: str                # "sigmoid" or "softmax"
    chain: tuple             # graph node labels, from the loss op down to the sigmoid/softmax
    module: str | None       # the module whose output it was, None for a functional call


@dataclass(frozen=True)
class OutputProbabilities(Signal):
    """The window's records: output rows on the simplex (and the loss's gradient on them),
    and loss graphs that squash a sigmoid or softmax twice."""

    records: tuple[ProbabilityRecord, ...]
    squashed_twice: tuple[SquashedTwiceRecord, ...]


class ProbabilitiesProbe(Probe):
    publishes = (OutputProbabilities,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._pending = None        # this sample's measurement, until it completes
        self._handles = []          # the hook on this sample's output tensor
        self._records = deque(maxlen=ctx.window)
        self._squashers = []        # (module name, its output's graph node) of this sample
        self._twice = deque(maxlen=ctx.window)
        self._unmeasured = 0        # sampled steps since the rows were last measured
        self._decided = (None, True)   # (step, whether its rows are measured)

    def attach(self):
        backend = self.ctx.backend
        handles = [backend.add_forward_hook(backend.model, self._on_output)]
        for name, module in backend.named_modules():
            if type(module).__name__ in _SQUASHERS:
                handles.append(backend.add_forward_hook(module, self._squasher(name)))
        return handles

    def begin(self):
        self._drop()
        self._squashers = []

    def _squasher(self, name):
        def hook(module, args, output):
            node = getattr(output, "grad_fn", None)
            if self.ctx.sample is not None and node is not None:
                self._squashers.append((name, node))
        return hook

    def on_sampled_step(self, loss):
        """With a loss tensor: the graph's sigmoids and softmaxes fed to a loss that applies
        its own."""
        ctx = self.ctx
        if getattr(loss, "grad_fn", None) is None:
            return
        for chain, op, node in ctx.kernels.squashed_twice(loss, walk=ctx.loss_walk(loss)):
            module = next((name for name, seen in self._squashers if seen is node), None)
            self._twice.append(SquashedTwiceRecord(ctx.step, _SQUASHERS[op], chain, module))
        self._squashers = []

    def _on_output(self, module, args, output):
        ctx = self.ctx
        if ctx.sample is None or self._pending is not None or not ctx.backend.grad_enabled():
            return None
        tensor = ctx.first_tensor(output)
        if tensor is None or len(tensor.shape) < 2 or not tensor.requires_grad:
            return None
        shape = tuple(tensor.shape)
        axes = [axis for axis in dict.fromkeys((1, len(shape) - 1)) if shape[axis] >= 2]
        if not axes or _count(shape) == 0 or not floating(tensor) or not self._rows_wanted():
            return None
        pending = {"step": ctx.step, "axes": axes, "classes": [shape[a] for a in axes],
                   "simplex": [ctx.kernels.simplex_deviation(tensor, a) for a in axes],
                   "misfit": None, "values": None}
        self._pending = pending
        if not self._latest_on_simplex():
            return None

        def on_gradient(grad):
            if pending["misfit"] is None:
                pending["misfit"] = [ctx.kernels.cross_entropy_misfit(tensor, grad, a)
                                     + ctx.kernels.pick_misfit(grad, a) for a in axes]
        self._handles.append(ctx.backend.add_tensor_hook(tensor, on_gradient))
        return None

    def _rows_wanted(self):
        """Whether to measure the output's rows at this sampled step: while the latest
        measured sample was on the simplex (or none was), else every ``SIMPLEX_RECHECK``-th
        sampled step (an output of logits stays one); decided once per step."""
        step = self.ctx.step
        if self._decided[0] == step:
            return self._decided[1]
        wanted = self._latest_on_simplex() or self._unmeasured + 1 >= SIMPLEX_RECHECK
        self._unmeasured = 0 if wanted else self._unmeasured + 1
        self._decided = (step, wanted)
        return wanted

    def _latest_on_simplex(self):
        """The latest measured sample had an axis on the simplex, or none was measured: then
        the gradient's fit is worth its hook too."""
        if not self._records:
            return True
        latest = self._records[-1].step
        for record in reversed(self._records):   # the latest sample's axes
            if record.step != latest:
                return False
            if record.on_simplex:
                return True
        return False

    def contribute(self):
        pending = self._pending
        if pending is None or pending["values"] is not None:
            return
        parts = [t for pair in pending["simplex"] for t in pair]
        if pending["misfit"] is not None:
            parts += [t for five in pending["misfit"] for t in five]
        pending["values"] = ()

        def receive(values):
            pending["values"] = values
        self.ctx.collector.add(parts, receive)

    def finish(self, sample):
        pending = self._pending
        if pending is not None and pending["values"]:
            values = list(pending["values"])
            count = len(pending["axes"])
            simplex, fit = values[:2 * count], values[2 * count:]
            for i, (axis, classes) in enumerate(zip(pending["axes"], pending["classes"])):
                self._records.append(ProbabilityRecord(
                    step=pending["step"], axis=axis, classes=classes,
                    smallest=float(simplex[2 * i]), sum_error=float(simplex[2 * i + 1]),
                    misfit=float(fit[5 * i]) if fit else None,
                    rows=int(fit[5 * i + 1]) if fit else 0,
                    spread=float(fit[5 * i + 2]) if fit else None,
                    pick_misfit=float(fit[5 * i + 3]) if fit else None,
                    pick_rows=int(fit[5 * i + 4]) if fit else 0))
        self._drop()

    def signals(self):
        return (OutputProbabilities(tuple(self._records), tuple(self._twice)),)

    def close(self):
        self._drop()
        self._squashers = []

    def _drop(self):
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()
        self._pending = None


_SQUASHERS = {"Sigmoid": "sigmoid", "Softmax": "softmax"}   # module types and graph ops



def _count(shape):
    total = 1
    for size in shape:
        total *= size
    return total
