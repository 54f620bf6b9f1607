"""Checks of the first forward pass: a user's mistake seen in the model's output or the loss
becomes a ``DiagnosticsError`` that names the argument.

The batch itself is a ``diagnostics.batch.Batch`` (converted to float64 copies for the check).
"""
import math

import numpy as np

from ..errors import require
from ..layouts import class_axis


def check_output(backend, output, batch):
    """Targets whose shape fits no layout of the model's logits (one tensor of each).

    Class indices fit ``(N, C, ...)`` or ``(N, ..., C)`` logits (the sequence-model layout,
    whose loss flattens both); floating targets must have the logits' shape, since another
    shape broadcasts silently in an elementwise loss. Targets in a tuple are left to the loss.
    """
    logits, targets = batch.logits(backend, output), batch.targets
    if not (backend.is_tensor(logits) and backend.is_tensor(targets)):
        return
    out_shape, target_shape = tuple(logits.shape), tuple(targets.shape)
    kind = backend.to_numpy(targets).dtype.kind
    if kind in "iu":
        expected = [out_shape[:1] + out_shape[2:], out_shape[:-1]] if len(out_shape) >= 2 \
            else [()]
        shown = " or ".join(str(s) for s in dict.fromkeys(expected))
        require(class_axis(out_shape, target_shape) is not None, "targets",
                f"class indices of shape {shown} for a model output of shape {out_shape}",
                f"shape {target_shape}")
    else:
        require(target_shape == out_shape, "targets",
                f"shape {out_shape}, the model output's (another shape broadcasts silently in "
                f"the loss; pass targets in a tuple to skip this check)", f"shape {target_shape}")


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
