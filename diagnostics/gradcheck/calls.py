"""Checks of the first forward pass: a user's mistake seen in the model's output or the loss
becomes a ``DiagnosticsError`` that names the argument.

The batch itself is a ``diagnostics.batch.Batch`` (converted to float64 copies for the check).
"""
import math

import numpy as np

from .. import outputs
from ..errors import require
from ..layouts import class_axis, rows_coupled


def layout_mismatch(backend, output, batch):
    """What targets the logits would take in a layout recognised without the loss, when the
    targets fit none of them; None when they fit, or when there is nothing to compare.

    Class indices fit ``(N, C, ...)`` or ``(N, ..., C)`` logits (the sequence-model layout,
    whose loss flattens both); floating targets the logits' shape. The user's loss is the
    authority: this text explains an exception it raises, or a broadcast it makes
    (``broadcasts``), and rejects nothing by itself.
    """
    logits, targets = batch.logits(backend, output), batch.targets
    if not (backend.is_tensor(logits) and backend.is_tensor(targets)):
        return None
    out_shape, target_shape = tuple(logits.shape), tuple(targets.shape)
    kind = backend.to_numpy(targets).dtype.kind
    if kind in "iu":
        if class_axis(out_shape, target_shape) is not None:
            return None
        if len(out_shape) < 2:
            return f"class indices for a model output of shape {out_shape}"
        first, last = out_shape[:1] + out_shape[2:], out_shape[:-1]
        shown = (str(first) if first == last else
                 f"{first} (classes on axis 1) or {last} (classes on the last axis)")
        return f"class indices of shape {shown} for a model output of shape {out_shape}"
    if target_shape == out_shape:
        return None
    return f"shape {out_shape}, the model output's"


def broadcasts(backend, output, batch):
    """True when the loss compares each example with other examples' targets
    (``layouts.rows_coupled``): float targets of another shape that broadcast silently."""
    targets = batch.target_array()
    if targets is None or isinstance(batch.targets, tuple):
        return False
    try:
        key = batch.logits_key(backend, output)
    except LookupError:
        return False
    logits = outputs.pick(output, key)
    if not backend.is_tensor(logits):
        return False
    return rows_coupled(backend, batch.loss_fn, output, key,
                        backend.to_numpy(logits).astype(np.float64), targets)


def check_loss(backend, loss):
    """A loss that is a one-element tensor of the framework, finite, and part of the graph."""
    framework = backend.name
    require(backend.is_tensor(loss), "loss_fn",
            f"to return a {framework} tensor holding one number (not a float from .item())",
            type(loss).__name__)
    size = int(np.prod(tuple(loss.shape), dtype=np.int64))
    require(size == 1, "loss_fn", "a scalar loss (one element); reduce it, e.g. with .mean()",
            f"shape {tuple(loss.shape)}")
    value = backend.scalar(loss)
    require(math.isfinite(value), "loss_fn", "a finite loss on this batch", value)
    require(bool(loss.requires_grad), "loss_fn",
            "a loss computed from the model's output inside the graph (requires_grad is "
            "False: was it built from .detach()ed or .item() values?)", "requires_grad=False")
