"""Targets that no gradient reaches, read off the class losses' targets (``probes.targets``):
IGNORED_CLASS (an ignore_index that is a real class), PADDING_SCORED (padding that makes up
most of what the loss scores) and LABEL_RANGE per element (masks and tag sequences that never
use some of the output's classes)."""
import numpy as np

from ...findings import Finding
from ...tools.label_checks import LabelTally, judge_label_range
from ..probes.loss_calls import loss_name
from ..probes.targets import LossTargets

MIN_STEPS = 2          # sampled steps that show it: one odd batch is not the data
PADDING_SHARE = 0.5    # padding is "most of the scored positions" beyond this share



def ignored_class(view):
    """IGNORED_CLASS: ``ignore_index`` is one of the output's classes (0 <= it < C) and the
    positions it drops lie inside the content (scored positions on both sides along the rows
    and the columns of a (rows, positions) target, along a spatial axis of an image), at most
    of the sampled steps: real targets of that class, not padding. Padding, even an in-range
    pad id, fills the ends of the rows (or a border of an image), so it is never inside; a 1-D
    target has no rows to tell the two apart and is not judged."""
    findings = []
    for (function, classes, ignore), records in _by_loss(view):
        if not 0 <= ignore < classes:
            continue
        measured = [r for r in records if r.ignored_interior is not None and r.ignored]
        inside = [r for r in measured if r.ignored_interior > 0]
        if len(inside) < MIN_STEPS or 2 * len(inside) < len(measured):
            continue
        last = inside[-1]
        ignored = sum(r.ignored for r in measured)
        elements = sum(r.elements for r in measured)
        findings.append(Finding(
            "IGNORED_CLASS", "warning", "loss",
            f"{loss_name(function)} is called with ignore_index={ignore}, which is class {ignore} "
            f"of the {classes} classes its input scores, and the positions it drops are real "
            f"content, not padding: at {len(inside)} of {len(measured)} sampled steps they lie "
            f"between scored positions ({last.ignored_interior} of the {last.ignored} ignored "
            f"positions at step {last.step}, targets {_shape(last)}); {ignored / elements:.0%} "
            f"of the targets are class {ignore} and never reach the loss, so the model never "
            f"learns to predict it",
            f"if class {ignore} is a real class, pass an ignore_index no class uses (the "
            f"default -100) and set only padding or void positions to it (pad label sequences "
            f"with -100); if {ignore} means void, map it to -100 (or 255) and give the output "
            f"the remaining classes",
            {"function": function, "ignore_index": ignore, "classes": classes,
             "ignored_share": ignored / elements, "interior_positions": last.ignored_interior,
             "ignored_positions": last.ignored, "steps_inside": [r.step for r in inside],
             "sampled_steps": [r.step for r in measured], "layout": list(last.layout)}))
    return findings


def padding_scored(view):
    """PADDING_SCORED: a padding value (one that occurs only in the leading or trailing run of
    the rows of a (rows, positions) target, the runs' lengths differing between rows) is not
    ignore_index and makes up most of the positions the loss scores, at ``MIN_STEPS`` sampled
    steps and most of those that show rows. A loss with ``reduction="none"`` is left out: its
    caller may still mask the padding."""
    findings = []
    for (function, classes, ignore), records in _by_loss(view):
        rows = [r for r in records if r.end_runs and r.reduction != "none"]
        hits = [(r, run) for r in rows for run in r.end_runs if _scored_padding(r, run)]
        steps = sorted({r.step for r, _ in hits})
        if len(steps) < MIN_STEPS or 2 * len(steps) < len({r.step for r in rows}):
            continue
        record, run = hits[-1]
        share = run.count / record.scored
        lengths = [length for length in run.runs if length]
        ignored = record.ignored / record.elements
        inverted = (f"; the rest ({ignored:.0%} of the positions) is ignore_index {ignore}: "
                    f"only padding is scored and the real positions are the ignored ones (a "
                    f"mask the wrong way round)" if share >= 0.99 and ignored > 0 else "")
        findings.append(Finding(
            "PADDING_SCORED", "warning", "loss",
            f"{share:.0%} of the positions {loss_name(function)} scores are padding: the value "
            f"{run.value} fills the {run.end} run of {len(lengths)} of the {len(run.runs)} "
            f"rows (lengths {min(lengths)}..{max(lengths)} of {record.layout[1]}) and occurs "
            f"nowhere else, and it is not ignore_index ({ignore}), at {len(steps)} sampled "
            f"steps (targets {_shape(record)} at step {record.step}){inverted}; the model "
            f"learns to predict padding and the real positions get a small share of each "
            f"step's gradient",
            f"leave the padding out of the loss: ignore_index={run.value} (or pad the labels "
            f"with -100: labels[attention_mask == 0] = -100), or mask the per-position loss "
            f"(reduction='none', times the mask, over the mask's sum)",
            {"function": function, "padding_value": run.value, "end": run.end,
             "padding_share": share, "run_lengths": lengths[:8], "rows": len(run.runs),
             "ignore_index": ignore, "ignored_share": ignored,
             "sampled_steps": steps, "layout": list(record.layout)}))
    return findings


def _scored_padding(record, run):
    lengths = {length for length in run.runs if length}
    return (run.value != record.ignore_index and 0 <= run.value < record.classes
            and run.interior == 0 and len(lengths) >= 2 and record.scored > 0
            and run.count > PADDING_SHARE * record.scored)


def label_range_per_element(view):
    """LABEL_RANGE of per-element targets (masks, tag sequences), through the one rule of
    ``tools.label_checks``: summed over the sampled steps, the classes at either end of the
    output that no target uses, once the examples seen would have put each class in about
    ``EXPECTED_PER_CLASS`` of them (the examples, not the elements, are the independent draws:
    the pixels of one object share its class). An ignore_index inside the classes is never a
    target by design (IGNORED_CLASS judges it); an output as wide as one of the model's
    embeddings predicts tokens of a vocabulary, whose rare tokens need not occur, and is not
    judged."""
    findings = []
    for (function, classes, ignore), records in _by_loss(view):
        judged = [r for r in records
                  if r.per_element and r.counts is not None and not r.vocabulary]
        if len(judged) < MIN_STEPS:
            continue
        counts = np.sum([r.counts for r in judged], axis=0)
        draws = sum(r.items for r in judged)
        elements = sum(r.elements for r in judged)
        tally = LabelTally(counts, draws=draws, outside=sum(r.outside for r in judged),
                           exempt=frozenset({ignore}) if 0 <= ignore < classes else frozenset())
        seen = (f"over {draws} examples of per-element targets ({elements} targets at "
                f"{len(judged)} sampled steps, {loss_name(function)})")
        findings += judge_label_range(
            tally, seen=seen, location="loss",
            expectation="each class would be in about {:.0f} of them",
            fix_unused="check how the stored labels become class ids (a binarising mask > 0, "
                       "an integer division or offset, 0/255 masks divided): the targets "
                       "must use the classes 0..C-1 of the output; or give the output as "
                       "many classes as the labels have")
    return findings


def _by_loss(view):
    """The window's records, grouped by loss call (function, classes, ignore_index)."""
    targets = view.signal(LossTargets)
    groups = {}
    for record in targets.records if targets is not None else ():
        groups.setdefault(record.loss, []).append(record)
    return groups.items()


def _shape(record):
    shape = "x".join(str(size) for size in record.shape)
    if record.layout != record.shape:
        return f"{shape}, read as {'x'.join(str(size) for size in record.layout)}"
    return shape


CHECKS = (ignored_class, padding_scored, label_range_per_element)
