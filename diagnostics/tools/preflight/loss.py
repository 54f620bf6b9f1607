"""The loss at init: finite (NAN_LOSS), and near that of an uninformative output (-log(1/C)
for C classes, mean(y**2) for a squared error; BAD_INIT_LOSS)."""
from __future__ import annotations

import math

import numpy as np

from .. import _training as T
from .context import Run
from .facts import Fact
from .report import Outcome, failed, failing, first_line_of, passed
from .targets import class_axis_for

INIT_LOSS_FACTOR = 1.5    # BAD_INIT_LOSS above this times the uninformative output's loss...
INIT_LOSS_MARGIN = 0.1    # ...and at least this much above it
# For a squared error, an all-zero output scores mean(y**2), and a fresh net's output adds
# about mean(output**2): the ratio is 1 + (output scale / target scale)**2, which a healthy
# init puts anywhere from about 1 to 3 when the targets are small. Above 10 the outputs are
# over 3 times the targets' scale.
SQUARED_INIT_LOSS_FACTOR = 10.0


def loss_at_init(run: Run) -> Outcome:
    value, error = run.loss_call()
    if error is not None:
        return failed(f"loss_fn raised {type(error).__name__}: {first_line_of(error)}",
                      facts=run.facts.lacking({Fact.LOSS: "the loss could not be computed"}))
    facts = run.facts
    logits = facts.logits.array if facts.logits is not None else None
    targets = run.batch.target_array()
    baseline = T.uninformative_loss(run.backend, run.batch, facts.output.value,
                                    run.logits_key(), logits)
    if not math.isfinite(value):
        return failing(f"loss {value}", code="NAN_LOSS", location="loss",
                       facts=facts.lacking({Fact.LOSS: "the loss at init is not finite"}))(
            message=f"the loss at init is {value}",
            suggestion="look for log(0), division by zero or overflow in forward or the "
                       "loss; check the inputs for NaN/Inf",
            evidence={"loss": value})
    facts = facts.found(loss=value, uninformative_loss=baseline)
    if baseline is None:
        return passed(f"loss {value:.4g}", facts=facts)
    axis = class_axis_for(logits, targets) if targets is not None else None
    classes = logits.shape[axis] if axis is not None else None
    reference = _reference(baseline, classes)
    summary = f"loss {value:.4g}, expected about {reference}"
    ratio = value / baseline
    if not classes and targets is not None and _is_squared_error(baseline, targets):
        return _squared_error_at_init(summary, value, baseline, ratio, facts)
    too_high = value > INIT_LOSS_FACTOR * baseline and value - baseline > INIT_LOSS_MARGIN
    if not too_high:
        return passed(summary, facts=facts)
    return failing(summary, code="BAD_INIT_LOSS", location="loss", facts=facts)(
        message=f"the loss at init is {value:.4g}, {ratio:.1f} times the "
                f"{reference} of an uninformative output: the initial outputs are "
                f"confidently wrong",
        suggestion="scale the last layer's weights down (e.g. by 0.01) and set its bias to "
                   "0 (or to the log of the class frequencies); check the init scale",
        evidence={"loss": value, "expected": baseline, "classes": classes, "ratio": ratio},
        severity="warning")


def _reference(baseline, classes):
    """The uninformative loss in words. It is the user's loss_fn on an all-zero output: for a
    cross-entropy over ``classes`` classes that is -log(1/C); when it is not, say so (a
    log-softmax over another axis, the batch's, gives -log(1/N))."""
    if not classes:
        return f"{baseline:.4g} for an all-zero output"
    chance = math.log(classes)
    if math.isclose(baseline, chance, rel_tol=1e-3, abs_tol=1e-4):
        return f"-log(1/{classes}) = {baseline:.4g}"
    return (f"{baseline:.4g}, what loss_fn gives an all-zero output (not -log(1/{classes}) = "
            f"{chance:.4g}: if loss_fn is a cross-entropy over the {classes} classes, it "
            f"normalizes over another axis)")


def _squared_error_at_init(summary, loss, baseline, ratio, facts) -> Outcome:
    """Regression: only outputs far larger than the targets are a bad init."""
    if ratio <= SQUARED_INIT_LOSS_FACTOR:
        return passed(summary, facts=facts)
    scale = math.sqrt(ratio - 1)
    return failing(summary, code="BAD_INIT_LOSS", location="loss", facts=facts)(
        message=f"the squared error at init is {loss:.4g}, {ratio:.1f} times the "
                f"{baseline:.4g} (mean of the squared targets) of an all-zero output: the "
                f"initial outputs are about {scale:.1f} times the targets' scale (a fresh "
                f"net's squared error depends on the target scale, so only a ratio above "
                f"{SQUARED_INIT_LOSS_FACTOR:g}, outputs over 3 times the targets, is "
                f"flagged)",
        suggestion="scale the last layer's weights down, or standardise the targets "
                   "(subtract their mean, divide by their std) and undo it on prediction",
        evidence={"loss": loss, "expected": baseline, "classes": None,
                  "ratio": ratio, "limit": SQUARED_INIT_LOSS_FACTOR},
        severity="warning")


def _is_squared_error(baseline, targets) -> bool:
    """True when an all-zero output's loss is the mean (or sum) of the squared targets: a
    squared-error loss, whose scale is the targets'."""
    if targets.dtype.kind != "f":
        return False
    squares = np.square(targets.astype(np.float64))
    return any(math.isclose(baseline, level, rel_tol=1e-4)
               for level in (float(squares.mean()), float(squares.sum())))
