"""The targets against the output: their dtype and range as class labels (LABEL_DTYPE), and
shapes that would broadcast silently in an elementwise loss (SHAPE_BROADCAST)."""
from __future__ import annotations

import numpy as np

from ...layouts import class_axis, rows_coupled
from .context import Run
from .report import Outcome, failing, passed, skipped

IGNORE_INDEX = -100       # the class index torch's cross-entropy skips
IN_A_TUPLE = "targets in a tuple: left to loss_fn"


def label_dtype(run: Run) -> Outcome:
    output, targets = run.facts.logits.array, run.batch.target_array()
    if targets is None:
        return skipped(IN_A_TUPLE)
    summary = f"targets {targets.shape} {targets.dtype}"
    fail = failing(summary, code="LABEL_DTYPE", location="data")
    axis = class_axis_for(output, targets)
    if axis is None:
        _, error = run.loss_call()
        if targets.dtype.kind in "biu" and output.dtype.kind == "f" and error is not None:
            return fail(
                message=f"{targets.dtype} targets for a loss on {output.dtype} outputs, and "
                        f"loss_fn raised {type(error).__name__}; BCE and MSE need floating "
                        f"targets (torch raises on the dtype)",
                suggestion="pass targets.float()", evidence={"dtype": str(targets.dtype)},
                severity="warning")
        return passed(summary)
    classes = output.shape[axis]
    if targets.dtype.kind == "f":
        return fail(
            message=f"class labels are {targets.dtype} for an output of {classes} class "
                    f"scores; cross-entropy needs int64 class indices (torch raises "
                    f"'expected scalar type Long')",
            suggestion="pass targets.long() (torch) or targets.astype(np.int64)",
            evidence={"dtype": str(targets.dtype), "classes": classes})
    if targets.dtype != np.int64 and run.loss_call()[1] is not None:
        return fail(
            message=f"class labels are {targets.dtype}; cross-entropy needs int64 class "
                    f"indices",
            suggestion="convert with targets.long() (torch) or astype(np.int64)",
            evidence={"dtype": str(targets.dtype), "classes": classes})
    outside = (targets != IGNORE_INDEX) & ((targets < 0) | (targets >= classes))
    if outside.any():
        return fail(
            message=f"{int(outside.sum())} labels lie outside [0, {classes}) (values "
                    f"{targets.min()} to {targets.max()}); the output has {classes} classes",
            suggestion="labels must be 0..C-1: shift 1-based labels down, or widen the "
                       "last layer",
            evidence={"outside": int(outside.sum()), "classes": classes,
                      "min": targets.min(), "max": targets.max()})
    return passed(summary + f", class indices in [0, {classes})")


def shapes(run: Run) -> Outcome:
    output, targets = run.facts.logits.array, run.batch.target_array()
    if targets is None:
        return skipped(IN_A_TUPLE)
    summary = f"output {output.shape}, targets {targets.shape}"
    if class_axis_for(output, targets) is not None or output.shape == targets.shape:
        return passed(summary)
    fail = failing(summary, code="SHAPE_BROADCAST", location="loss")
    value, error = run.loss_call()
    try:
        joint = np.broadcast_shapes(output.shape, targets.shape)
    except ValueError:
        if error is None:
            return passed(summary + "; loss_fn takes them as they are")
        return fail(
            message=f"output {output.shape} and targets {targets.shape} neither match nor "
                    f"are class indices for it",
            suggestion="make the last layer's width match the targets",
            evidence={"output": output.shape, "targets": targets.shape})
    if error is None and not _rows_coupled(run, output, targets):
        return passed(summary + "; loss_fn takes them as they are")
    return fail(
        message=f"output {output.shape} and targets {targets.shape} broadcast to {joint} in "
                f"an elementwise loss: every output is compared with every target, and the "
                f"loss cannot reach zero",
        suggestion="make them equal: output.squeeze(-1) or targets.unsqueeze(-1) "
                   "(targets.view_as(output))",
        evidence={"output": output.shape, "targets": targets.shape, "broadcast": joint})


def _rows_coupled(run: Run, logits, targets) -> bool:
    """The loss compares examples with each other's targets (``layouts.rows_coupled``)."""
    return rows_coupled(run.backend, run.batch.loss_fn, run.facts.output.value,
                        run.logits_key(), logits, targets)


def class_axis_for(output: np.ndarray, targets: np.ndarray) -> int | None:
    """The class axis of ``output`` (ndarray) when ``targets`` are class indices for it, in a
    layout ``diagnostics.layouts`` recognises, holding whole numbers of any dtype (a float
    dtype is the label dtype item's business); else None."""
    axis = class_axis(output.shape, targets.shape)
    if axis is None or targets.dtype.kind in "iu":
        return axis
    whole = (targets.dtype.kind == "f" and bool(np.all(np.isfinite(targets)))
             and bool(np.all(targets == np.round(targets))))
    return axis if whole else None
