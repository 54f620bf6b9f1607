"""What one batch can show about the model and the labels: example i's output depends only on
example i's input (BATCH_MIXING), not on its row (BATCH_POSITION_DEPENDENT; with
``pad_value=``, not on appended pads: PADDING_CHANGES_OUTPUT; with ``causal=True``, position t
only on positions <= t, CAUSALITY_LEAK), next-token targets, output units the labels never use
(LABEL_RANGE) and labels sorted by class (LABELS_SORTED)."""
from __future__ import annotations

import dataclasses

import numpy as np

from ...errors import DiagnosticsError
from ...findings import Finding
from ..batch_independence import check_batch_independence
from ..data_validation import validate_data
from ..label_checks import check_batch_label_order, check_label_range
from ..next_token import misaligned_targets
from .context import Run
from .report import FAIL, SKIP, Outcome, first_line, judged, passed, skipped
from .targets import IGNORE_INDEX, class_axis_for

LABELS_PER_CLASS = 20     # one batch tells an unused output unit only with this many labels
                          # per unit (a class rarer than 1/4 of its share is then seldom absent)
ORDER_PARTS = 4           # the batch is read as this many consecutive parts for label order


def batch_independence(run: Run) -> Outcome:
    """Karpathy's check: backpropagate from one example's output, on a copy in eval mode."""
    backend, batch = run.backend, run.batch
    if backend.name != "torch":
        return skipped("needs a torch model (input gradients through torch's autograd)")
    if batch.kwargs and not batch.args:
        probed = dict(batch.kwargs)                  # keyword inputs: input_ids and the rest
    elif not batch.kwargs and len(batch.args) == 1 and backend.is_tensor(batch.args[0]):
        probed = batch.args[0]
    elif not batch.kwargs and any(backend.is_tensor(a) for a in batch.args):
        probed = tuple(batch.args)                   # positional inputs, probed together
    else:
        return skipped("tensor inputs needed: run check_batch_independence")
    if batch.batch_size < 2:
        return skipped("a batch of one example")
    what = "example i's output depends only on example i's input, not on its row"
    if run.causal:
        what += ", and position t's only on positions <= t"
    if run.pad_value is not None:
        what += f", and not on pads ({run.pad_value!r}) appended to the sequence inputs"
    try:
        findings = check_batch_independence(backend.model, probed, causal=run.causal,
                                            output=batch.selector, pad_value=run.pad_value)
    except DiagnosticsError as error:   # raised by the user's model (its cause) fails the item
        return Outcome(FAIL if error.__cause__ is not None else SKIP, f"not checked: {error}")
    if findings:
        return judged("; ".join(first_line(f) for f in findings), findings)
    return passed(what + " (on a copy in eval mode)" + (f"; {findings.note}"
                                                         if findings.note else ""))


def next_token(run: Run) -> Outcome:
    """With ``causal=True``: the loss scores position t against input token t + 1."""
    judged_here, summary, findings = misaligned_targets(run.backend, run.batch,
                                                        run.facts.output.value,
                                                        run.logits_key())
    if judged_here:
        return judged(summary, findings)
    return skipped(summary, findings)


def label_range(run: Run) -> Outcome:
    labels, classes = _class_labels(run)
    if labels is None or not labels.size:
        return skipped(classes if labels is None else "no labels")
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= classes:
        return skipped("labels outside the output: see label dtype")
    summary = (f"this batch's {labels.size} labels use classes {low}..{high} of the output's "
               f"0..{classes - 1}")
    if labels.size < LABELS_PER_CLASS * classes:
        return passed(summary + " (one batch is too few to tell an unused output unit: run "
                                "check_label_range on all labels)")
    findings = [_one_batch(f, labels.size) for f in check_label_range(labels,
                                                                      num_classes=classes)]
    return judged(summary, findings)


def label_order(run: Run) -> Outcome:
    labels, classes = _class_labels(run)
    if labels is None:
        return skipped(classes)
    if run.batch.target_array().ndim != 1:
        return skipped("labels per position: order across examples not checked")
    parts = [part for part in np.array_split(labels, ORDER_PARTS) if part.size >= 2]
    used = np.unique(labels)
    summary = (f"{labels.size} labels of {used.size} classes in this one batch; run "
               f"check_batch_label_order on the loader's first batches to see the order "
               f"across batches")
    if len(parts) < 2:
        return skipped("a batch too small to read in parts")
    findings = [_one_batch(f, labels.size) for f in check_batch_label_order(parts)]
    return judged(summary, findings)


def _class_labels(run: Run):
    """``(labels as a 1-D int array without ignored ones, classes)``, or ``(None, reason)``."""
    logits, targets = run.facts.logits.array, run.batch.target_array()
    axis = class_axis_for(logits, targets) if targets is not None else None
    if axis is None or targets.dtype.kind not in "iuf":
        return None, "targets are not class indices"
    labels = targets.reshape(-1).astype(np.int64)
    return labels[labels != IGNORE_INDEX], logits.shape[axis]


def _one_batch(finding: Finding, rows: int) -> Finding:
    """A label finding judged on the one batch preflight sees, saying so."""
    return dataclasses.replace(
        finding, message=finding.message + f" (seen in the one batch of {rows} labels "
                                           f"preflight gets)",
        evidence={**finding.evidence, "batches_seen": 1, "labels_seen": rows})


def data_pipeline(run: Run) -> Outcome:
    """``validate_data`` over the training Dataset/DataLoader (and the test one)."""
    report = validate_data(run.data, test=run.test_data)
    alarms = [finding for finding in report.findings if finding.is_alarm]
    return judged("; ".join(first_line(f) for f in alarms) or f"no finding ({report.sizes})",
                  report.findings)
