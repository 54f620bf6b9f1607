"""The targets of the class losses, as the loss sees them: which classes and positions it scores.

``F.cross_entropy`` and ``F.nll_loss`` (and so ``nn.CrossEntropyLoss`` and ``nn.NLLLoss``)
score a target only where it is not ``ignore_index``, and their class axis is dim 1 of their
input (dim 0 of an unbatched one), whatever the model's output looked like before it was
reshaped. Nothing fails when the ignored value is a real class, when padding is scored, or when
per-element labels (a mask, a tag sequence) only ever use a few of the classes: the loss falls
and the model learns the wrong thing. Those properties are in the targets' values, read here.

On a sampled iteration, with gradients enabled, each of the first ``CALLS_PER_STEP`` calls of
those functions queues on the step's one transfer: the targets' count per class (for outputs of
at most ``MAX_COUNTED`` classes), the ignored and out-of-range counts, the ignored positions
that lie inside the content (scored positions on both sides), and, for targets of shape
(rows, positions), the structure of the value that ends the rows and of the one that starts
them (padding: a value that occurs only as a leading or trailing run of each row). Ignored
positions are transparent there when ``ignore_index`` is no class: a loss that shifts its
labels itself pads them with one ignored column (Hugging Face's causal-LM loss), and a prompt
masked with -100 precedes the content; the padding run is the one next to them.

Flattened targets (``tags.reshape(-1)`` for ``logits.reshape(-1, C)``) have their rows back
when they are a view of a contiguous (rows, positions) tensor, or else when their length is a
multiple of the model input's batch size; otherwise they are judged as one label per row.
Targets that are class probabilities (floating, the input's shape) are not class indices and
are skipped. The class count the loss saw is also put on the sample (``Sample.loss_classes``):
the uniform-guess level of (N, C, H, W) logits is ln C, not ln W (unless ``Monitor(output=)``
names the entry that holds the logits: the user's word is kept).
"""
from collections import deque
from dataclasses import dataclass

from .loss_calls import LOSS_CALLS
from .base import Probe, Signal, dense, floating

FUNCTIONS = ("cross_entropy", "nll_loss")
CALLS_PER_STEP = 4      # loss calls read per sampled iteration (a model may score several heads)
MAX_COUNTED = 1024      # per-class counts only for outputs this small (not a token vocabulary)
DEFAULT_IGNORE = -100
_IGNORE_POSITION = 4    # F.cross_entropy(input, target, weight, size_average, ignore_index,
_REDUCE_POSITION = 5    #                 reduce, reduction, ...); F.nll_loss alike
_REDUCTION_POSITION = 6


@dataclass(frozen=True)
class EndRun:
    """A value that ends (``end="trailing"``) or starts (``"leading"``) the rows of a
    (rows, positions) target: where it is a padding value, it occurs in those runs alone."""

    end: str
    value: int
    count: int                # its positions in the whole target
    interior: int             # of those, positions outside the run at either end of their row
    runs: tuple[int, ...]     # per row, its positions in the row's end runs (0: none)


@dataclass(frozen=True)
class TargetRecord:
    """One call of a class loss on a sampled step: the targets as that loss scores them."""

    step: int
    function: str
    classes: int                     # C: dim 1 of the loss's input
    ignore_index: int
    reduction: str                   # "none": the caller may still mask positions
    shape: tuple[int, ...]           # the targets as passed
    layout: tuple[int, ...]          # as judged: items first ((N, T) back from (N * T,))
    ignored: int                     # positions equal to ignore_index
    outside: int                     # positions outside [0, C) that are not ignore_index
    counts: tuple[int, ...] | None   # scored positions per class 0..C-1 (None: C > MAX_COUNTED)
    ignored_interior: int | None     # ignored positions with content on both sides (None:
                                     # not measured: a 1-D layout, or ignore_index outside [0, C))
    end_runs: tuple[EndRun, ...]     # (rows, positions) layouts only
    vocabulary: bool                 # the model embeds as many tokens as the output has classes

    @property
    def elements(self):
        return _product(self.layout)

    @property
    def items(self):
        """Examples (rows, images, clouds) the targets cover."""
        return self.layout[0] if self.layout else 1

    @property
    def per_element(self):
        """Several targets per example (a mask, a tag sequence), not one label per row."""
        return len(self.layout) >= 2 and self.elements > self.items

    @property
    def scored(self):
        return self.elements - self.ignored

    @property
    def loss(self):
        """Which loss call this is, across steps."""
        return (self.function, self.classes, self.ignore_index)


@dataclass(frozen=True)
class LossTargets(Signal):
    """The window's records of the targets the class losses scored."""

    records: tuple[TargetRecord, ...]


class TargetsProbe(Probe):

    publishes = (LossTargets,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._records = deque(maxlen=4 * ctx.window)
        self._pending = []           # (header, tensors, end values) of this sampled iteration
        self._calls = 0
        self._listening = False
        self._vocabularies = None    # the model's embedding sizes, read once
        self._error = None

    def begin(self):
        self._pending, self._calls = [], 0
        if self.ctx.backend.name == "torch" and not self._listening:
            LOSS_CALLS.listen(self)
            self._listening = True

    def loss_called(self, function, args, kwargs, result):
        """A class loss was called (told by the shared patch, after the original returned)."""
        if function not in FUNCTIONS:
            return
        try:
            ctx = self.ctx
            if ctx.sample is None or self._calls >= CALLS_PER_STEP:
                return
            import torch
            if not torch.is_grad_enabled():
                return
            read = _read_call(args, kwargs)
            if read is None:
                return
            self._calls += 1
            if ctx.sample.loss_classes is None and ctx.output is None:
                ctx.sample.loss_classes = read.classes   # Monitor(output=) says it instead
            self._queue(function, read)
        except Exception as error:     # noqa: BLE001 - never into the user's loss call
            self._error = self._error or error

    def _queue(self, function, read):
        import torch

        classes, ignore = read.classes, read.ignore_index
        targets = _with_rows(read.targets, self.ctx.sample.batch)
        layout = tuple(targets.shape)
        flat = targets.reshape(-1)
        is_ignored = flat == ignore
        inside = (flat >= 0) & (flat < classes) & ~is_ignored
        tensors = [is_ignored.sum(), ((~inside) & (~is_ignored)).sum()]
        counted = classes <= MAX_COUNTED
        if counted:
            tensors.append(torch.bincount(torch.where(inside, flat, classes),
                                          minlength=classes + 1)[:classes])
        measure_interior = len(layout) >= 2 and 0 <= ignore < classes
        if measure_interior:
            tensors.append(_ignored_interior(targets == ignore))
        ends = []
        if len(layout) == 2 and layout[1] >= 2:
            transparent = (targets == ignore) if not 0 <= ignore < classes else None
            for end in ("trailing", "leading"):
                value = torch.mode(_end_values(targets, transparent, ignore, end)).values
                count, interior, runs = _end_runs(targets == value, transparent)
                tensors += [value, count, interior, runs]
                ends.append(end)
        header = dict(step=self.ctx.step, function=function, classes=classes,
                      ignore_index=ignore, reduction=read.reduction,
                      shape=tuple(read.targets.shape), layout=layout,
                      vocabulary=classes in self._embedding_sizes())
        self._pending.append((header, tuple(tensors), counted, measure_interior, tuple(ends)))

    def _embedding_sizes(self):
        if self._vocabularies is None:
            from torch import nn
            model = self.ctx.backend.model
            modules = model.modules() if isinstance(model, nn.Module) else ()
            self._vocabularies = frozenset(
                m.num_embeddings for m in modules
                if isinstance(m, (nn.Embedding, nn.EmbeddingBag)))
        return self._vocabularies

    def contribute(self):
        if self._error is not None:
            raise self._error
        pending, self._pending = self._pending, []
        for header, tensors, counted, measure_interior, ends in pending:
            def receive(values, header=header, counted=counted,
                        measure_interior=measure_interior, ends=ends):
                self._records.append(_record(header, values, counted, measure_interior, ends))
            self.ctx.collector.add(tensors, receive)

    def signals(self):
        return (LossTargets(tuple(self._records)),)

    def close(self):
        self._pending = []
        if self._listening:
            self._listening = False
            LOSS_CALLS.unlisten(self)


@dataclass(frozen=True)
class _Call:
    targets: object
    classes: int
    ignore_index: int
    reduction: str


def _read_call(args, kwargs):
    """The class-index targets of one loss call and what the loss does with them, or None
    when the call has none (class probabilities as targets, an unbatched input, an empty
    batch, shapes the loss itself will refuse)."""
    import torch

    scores = args[0] if args else kwargs.get("input")
    targets = args[1] if len(args) > 1 else kwargs.get("target")
    if not (isinstance(scores, torch.Tensor) and isinstance(targets, torch.Tensor)):
        return None
    if (not floating(scores) or floating(targets) or targets.dtype == torch.bool
            or targets.is_complex() or not dense(targets) or not dense(scores)
            or scores.dim() < 2 or targets.numel() == 0):
        return None
    if tuple(targets.shape) != (scores.shape[0],) + tuple(scores.shape[2:]):
        return None
    ignore = _argument(args, kwargs, "ignore_index", _IGNORE_POSITION, DEFAULT_IGNORE)
    reduction = _argument(args, kwargs, "reduction", _REDUCTION_POSITION, "mean")
    if _argument(args, kwargs, "reduce", _REDUCE_POSITION, None) is False:
        reduction = "none"
    if not isinstance(ignore, int) or isinstance(ignore, bool):
        return None
    return _Call(targets.detach(), int(scores.shape[1]), int(ignore), str(reduction))


def _argument(args, kwargs, name, position, default):
    if name in kwargs:
        return kwargs[name]
    return args[position] if len(args) > position else default


def _with_rows(targets, batch):
    """``targets`` with the rows of a flattened (rows, positions) target back: its base when it
    is a view of all of a contiguous tensor, else (batch, -1) when the model's batch divides its
    length; size-1 axes after the first dropped."""
    if targets.dim() == 1:
        base = targets._base
        if (base is not None and base.dim() >= 2 and base.numel() == targets.numel()
                and base.is_contiguous() and targets.is_contiguous()
                and base.data_ptr() == targets.data_ptr()):
            targets = targets.view(base.shape)
        elif batch and batch > 1 and targets.numel() % batch == 0 and targets.numel() > batch:
            targets = targets.reshape(batch, -1)
    if targets.dim() >= 2:
        keep = [targets.shape[0]] + [size for size in targets.shape[1:] if size != 1]
        targets = targets.reshape(keep)
    return targets


def _in_end_runs(equal, dim):
    """Where ``equal`` is True in the run that starts or ends each line along ``dim``."""
    as_int = equal.to(dtype=_int_dtype())
    leading = as_int.cumprod(dim).bool()
    trailing = as_int.flip(dim).cumprod(dim).flip(dim).bool()
    return leading | trailing


def _ignored_interior(equal):
    """Ignored positions with content on both sides. Of a (rows, positions) target: along the
    rows and along the columns alike (either axis may be the batch: time-major targets), so a
    padding run at the end of each row is never inside; of an image's (N, H, W): along any
    spatial axis, so a padded band or border (an end run of every line it crosses) is never
    inside."""
    if equal.dim() == 2:
        along_rows = (equal & ~_in_end_runs(equal, 1)).sum()
        along_columns = (equal & ~_in_end_runs(equal, 0)).sum()
        return along_rows.minimum(along_columns)
    inside = None
    for dim in range(1, equal.dim()):
        here = equal & ~_in_end_runs(equal, dim)
        inside = here if inside is None else inside | here
    return inside.sum()


def _end_values(targets, transparent, ignore, end):
    """Per row of a (rows, positions) target, the value at its ``end`` ("trailing" or
    "leading"), ignored positions skipped where ``transparent`` marks them (a row with nothing
    else gives ``ignore``); computed on the device, without a synchronisation."""
    import torch

    column = targets[:, -1] if end == "trailing" else targets[:, 0]
    if transparent is None:
        return column
    positions = torch.arange(targets.shape[1], device=targets.device).expand_as(targets)
    if end == "trailing":
        at = torch.where(transparent, -1, positions).amax(1)
    else:
        at = torch.where(transparent, targets.shape[1], positions).amin(1)
    found = (at >= 0) & (at < targets.shape[1])
    picked = targets.gather(1, at.clamp(0, targets.shape[1] - 1)[:, None])[:, 0]
    return torch.where(found, picked, torch.full_like(picked, ignore))


def _end_runs(equal, transparent=None):
    """``(count, interior, runs)`` of a value in a (rows, positions) target: its positions, those
    outside its end runs (which run across ``transparent`` positions), and per row its positions
    in them."""
    ends = _in_end_runs(equal if transparent is None else equal | transparent, 1)
    runs = (equal & ends).sum(1)
    count = equal.sum()
    return count, count - runs.sum(), runs


def _int_dtype():
    import torch
    return torch.int32


def _record(header, values, counted, measure_interior, ends):
    values = list(values)
    ignored, outside = int(values.pop(0)), int(values.pop(0))
    counts = tuple(int(c) for c in values.pop(0)) if counted else None
    interior = int(values.pop(0)) if measure_interior else None
    end_runs = []
    for end in ends:
        value, count, inner, runs = values[:4]
        del values[:4]
        end_runs.append(EndRun(end, int(value), int(count), int(inner),
                               tuple(int(r) for r in runs)))
    return TargetRecord(ignored=ignored, outside=outside, counts=counts,
                        ignored_interior=interior, end_runs=tuple(end_runs), **header)


def _product(shape):
    total = 1
    for size in shape:
        total *= size
    return total
