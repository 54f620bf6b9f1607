"""Label checks: targets that do not fit the output, and batches sorted by class.

``check_label_range(targets, num_classes=C)`` compares the class indices the targets use with
the ``C`` output units: a target ``>= C`` or ``< 0`` is a class the output lacks; labels that
start at 1 (or stop short of ``C - 1``) on a data set large enough that every unit would be a
target many times leave output units that are never a target (labels 1..10 with 11 outputs).

``check_batch_label_order(batches)`` looks at the labels of the first training batches in the
order the loader gives them: batches that each hold one class, or labels that never decrease
across batches, mean the data are sorted by class and not shuffled. Both return ``Finding``s
with codes LABEL_RANGE and LABELS_SORTED; both take arrays or tensors (torch, minigrad).
"""
import math
from dataclasses import dataclass, field

import numpy as np

from ..backends import numpy_of
from ..errors import DiagnosticsError, require
from ..findings import Finding
from .check_result import CheckResult

EXPECTED_PER_CLASS = 5      # an edge unit is "never used" only when it would be a target this often
SORTED_CHANCE = 1e-6        # a batch order this unlikely under shuffling is "sorted"
EXAMPLES = 5
MONOTONE_SHARE = 0.95       # regression targets: consecutive steps one way this often = sorted
MIN_ORDER_STEPS = 10


def check_label_range(targets, *, num_classes):
    """LABEL_RANGE findings for class-index ``targets`` against ``num_classes`` output units.

    ``targets``: all training labels (1-D integer array or tensor, or integral floats);
    ``num_classes``: the width of the model's output. Returns a ``CheckResult`` (a list of
    findings with ``passed`` and a readable ``str()``), empty for regression targets.
    """
    return CheckResult(_label_range(targets, num_classes=num_classes), check="label range")


@dataclass(frozen=True)
class LabelTally:
    """What the LABEL_RANGE rule reads, however the labels were gathered: ``counts[c]`` targets
    of each class ``c`` of the output's ``0..C-1``, ``outside`` targets beyond them (their
    distinct values in ``outside_values`` where known), ``draws`` independent draws of a class
    (rows with one label each, or the examples that per-element labels cover: the labels of one
    mask or sentence are not independent), and the classes never a target by design
    (``exempt``: an ignore_index inside the classes, which IGNORED_CLASS judges)."""

    counts: np.ndarray
    draws: int
    outside: int = 0
    outside_values: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    exempt: frozenset = frozenset()

    @property
    def num_classes(self):
        return int(self.counts.size)


def _label_range(targets, *, num_classes):
    labels = _class_indices(targets, "targets")
    require(isinstance(num_classes, (int, np.integer)) and not isinstance(num_classes, bool)
            and num_classes >= 2, "num_classes", "an int >= 2 (the model's output width)",
            repr(num_classes))
    if labels is None or labels.size == 0:
        return []
    inside = labels[(labels >= 0) & (labels < num_classes)]
    outside = labels[(labels < 0) | (labels >= num_classes)]
    tally = LabelTally(np.bincount(inside, minlength=num_classes), draws=int(labels.size),
                       outside=int(outside.size), outside_values=np.unique(outside))
    return judge_label_range(tally, seen=f"with {labels.size} rows")


def judge_label_range(tally, *, seen, location="data", fix_unused=None,
                      expectation="each unit would be a target about {:.0f} times"):
    """LABEL_RANGE findings for ``tally`` (a ``LabelTally``): an error for targets outside the
    classes; a warning for output units at the low or high end that are never a target when
    ``tally.draws`` would make each one a target at least ``EXPECTED_PER_CLASS`` times (labels
    that start at 1, or a mapping that stops short of ``C - 1``). ``seen`` says what was looked
    at ("with 200 rows") and ``expectation`` how often a unit would then be a target;
    ``fix_unused`` replaces the warning's fix."""
    num_classes, counts = tally.num_classes, np.asarray(tally.counts)
    used = np.flatnonzero(counts)
    values = np.asarray(tally.outside_values, dtype=np.int64)
    if tally.outside == 0 and used.size == 0:
        return []
    ends = [int(v) for v in (*used[:1], *used[-1:], *values[:1], *values[-1:])]
    low, high = min(ends), max(ends)
    evidence = {"num_classes": num_classes, "min_label": low, "max_label": high,
                "classes_used": int(used.size) + int(values.size), "rows": int(tally.draws)}
    if tally.outside:
        hint = (" (labels start at 1: subtract 1)" if low == 1 and high == num_classes else "")
        shown = f" ({_values(values)})" if values.size else ""
        return [Finding(
            "LABEL_RANGE", "error", location,
            f"{tally.outside} targets use classes the output lacks{shown}; the "
            f"model has {num_classes} output units, classes 0..{num_classes - 1}{hint}",
            "map the labels to 0..C-1 (e.g. y - 1 when they start at 1), or widen the output "
            "layer to the number of classes",
            {**evidence, "outside": int(tally.outside), "outside_classes": values[:EXAMPLES]})]
    expected = tally.draws / num_classes
    missing = [c for c in range(num_classes)
               if (c < low or c > high) and c not in tally.exempt]
    if missing and expected >= EXPECTED_PER_CLASS:
        start = " (labels start at 1)" if low == 1 else ""
        return [Finding(
            "LABEL_RANGE", "warning", location,
            f"{'output unit' if len(missing) == 1 else 'output units'} "
            f"{_values(np.array(missing))} {'is' if len(missing) == 1 else 'are'} never a "
            f"target: labels run "
            f"{low}..{high}{start} while the model has {num_classes} outputs; {seen} "
            + expectation.format(expected),
            fix_unused or "shift the labels to start at 0 (y - 1) and give the output exactly "
                          "as many units as there are classes",
            {**evidence, "unused_units": missing[:EXAMPLES]})]
    return []


def check_batch_label_order(batches):
    """LABELS_SORTED findings for the labels of consecutive training batches.

    ``batches``: the labels of the first few batches, in the order the loader yields them
    (a list of 1-D arrays or tensors; at least 2 batches of at least 2 labels each are
    needed to judge), or the batches themselves as a loader yields them, ``(inputs, labels)``
    pairs (``list(itertools.islice(loader, 8))``): the labels are their last entry. Regression
    targets (one float per example) are judged by the direction of consecutive values. Returns
    a ``CheckResult``.
    """
    return CheckResult(_batch_label_order(batches), check="batch label order")


def _batch_label_order(batches):
    require(not isinstance(batches, (str, bytes)) and hasattr(batches, "__iter__"), "batches",
            "a list of label arrays, one per batch", type(batches).__name__)
    raw = [_labels_of(batch) for batch in batches]
    labels = [_class_indices(batch, f"batches[{i}]") for i, batch in enumerate(raw)]
    if any(batch is None for batch in labels):
        return _target_order(raw)
    labels = [batch for batch in labels if batch.size]
    if len(labels) < 2 or min(batch.size for batch in labels) < 2:
        return []
    pooled = np.concatenate(labels)
    classes, counts = np.unique(pooled, return_counts=True)
    if classes.size < 2:
        return []
    share = counts / counts.sum()
    single = [i for i, batch in enumerate(labels) if np.unique(batch).size == 1]
    chance = math.prod(float(np.sum(share ** batch.size)) for batch in labels)
    steps = np.diff(pooled)
    monotone = bool((steps >= 0).all() or (steps <= 0).all())
    # the chance that shuffled labels come out in class order: 2 * prod(count!) / total!
    sorted_chance = math.exp(min(0.0, math.log(2) + sum(math.lgamma(c + 1) for c in counts)
                                 - math.lgamma(pooled.size + 1)))
    evidence = {"batches": len(labels), "single_class_batches": len(single),
                "classes_seen": int(classes.size), "monotone": monotone,
                "chance_if_shuffled": min(chance, sorted_chance) if monotone else chance}
    if len(single) == len(labels) and chance < SORTED_CHANCE:
        what = f"each of the {len(labels)} batches holds a single class"
    elif monotone and sorted_chance < SORTED_CHANCE:
        what = (f"labels never decrease across {len(labels)} batches "
                f"({len(single)} of them hold a single class)")
    else:
        return []
    return [Finding(
        "LABELS_SORTED", "warning", "data",
        f"training batches are sorted by class: {what} (classes {_values(classes)} seen); "
        f"the model sees one class at a time and forgets the others",
        "shuffle the training data every epoch (DataLoader(..., shuffle=True) or a random "
        "sampler)", evidence)]


def _target_order(batches):
    """LABELS_SORTED for regression targets (one value per example): the stream sorted by
    target, its consecutive values moving one way far more often than shuffling allows."""
    values = [_as_array(batch, f"batches[{i}]") for i, batch in enumerate(batches)]
    values = [v.reshape(-1) for v in values if v.ndim == 1 or (v.ndim == 2 and v.shape[1] == 1)]
    if len(values) != len(batches) or len(values) < 2:
        return []
    pooled = np.concatenate(values).astype(np.float64)
    steps = np.diff(pooled)
    steps = steps[np.isfinite(steps) & (steps != 0)]
    if steps.size < 2 * MIN_ORDER_STEPS:
        return []
    up = int(np.sum(steps > 0))
    same = max(up, steps.size - up)
    # the chance that shuffled values move one way this often: a binomial tail, bounded
    chance = math.exp(min(0.0, math.log(2) + _log_binomial_tail(steps.size, same)))
    if same < MONOTONE_SHARE * steps.size or chance >= SORTED_CHANCE:
        return []
    direction = "increase" if up >= steps.size - up else "decrease"
    return [Finding(
        "LABELS_SORTED", "warning", "data",
        f"training batches are sorted by target: consecutive targets {direction} in {same} of "
        f"{steps.size} steps across {len(values)} batches (range {pooled.min():.3g} to "
        f"{pooled.max():.3g}); the model sees one range of targets at a time and forgets the "
        f"others",
        "shuffle the training data every epoch (DataLoader(..., shuffle=True) or a random "
        "sampler)",
        {"batches": len(values), "steps": int(steps.size), "same_direction": int(same),
         "chance_if_shuffled": chance, "regression": True})]


def _log_binomial_tail(n, k):
    """log P(X >= k) for X ~ Binomial(n, 1/2), from its largest term (an upper bound)."""
    log_term = (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                - n * math.log(2))
    return log_term + math.log(n - k + 1)


def _labels_of(batch):
    """A loader's ``(inputs, labels)`` pair gives its labels; labels are themselves."""
    if (isinstance(batch, (tuple, list)) and len(batch) >= 2
            and all(getattr(part, "ndim", 0) >= 1 for part in batch)):
        return batch[-1]
    return batch


def _class_indices(value, argument):
    """A 1-D int64 array of class indices, or None for regression or one-hot targets."""
    array = _as_array(value, argument)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array.reshape(-1)
    if array.ndim != 1:
        return None
    if array.dtype.kind == "b":
        return array.astype(np.int64)
    if array.dtype.kind == "f":
        if not (np.isfinite(array).all() and np.array_equal(array, np.round(array))):
            return None
    return array.astype(np.int64)


def _as_array(value, argument):
    array = numpy_of(value)
    if array is None and isinstance(value, (list, tuple)):
        array = np.asarray(value)
    if array is None:
        raise DiagnosticsError(f"{argument}: expected a NumPy array or a tensor of labels, got "
                               f"{type(value).__module__}.{type(value).__qualname__}")
    require(array.dtype.kind in "biuf", argument, "numeric labels", f"dtype {array.dtype}")
    return array


def _values(values):
    shown = ", ".join(str(int(v)) for v in values[:EXAMPLES])
    return shown + (", ..." if len(values) > EXAMPLES else "")
