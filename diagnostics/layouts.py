"""How class-index targets meet class scores, in the layouts recognised without the loss.

``(N, C, ...)`` scores with ``(N, ...)`` targets (torch's ``cross_entropy``), and
``(N, ..., C)`` scores with ``(N, ...)`` targets (the sequence-model layout: logits ``(B, T,
V)``, labels ``(B, T)``, a loss that flattens both). Anything else is left to the user's loss
function, which is the authority on how its arguments meet; ``rows_coupled`` asks it
whether it compares examples with each other's targets (a broadcast).
"""
import numpy as np

from . import outputs


def class_axis(output_shape, target_shape):
    """The class axis (1 or -1) of ``output_shape`` for class indices of ``target_shape``, or
    None. Axis 1 wins when both fit (``(N, C)`` scores)."""
    output_shape, target_shape = tuple(output_shape), tuple(target_shape)
    if len(output_shape) != len(target_shape) + 1 or len(output_shape) < 2:
        return None
    if output_shape[:1] + output_shape[2:] == target_shape and output_shape[1] >= 2:
        return 1
    if output_shape[:-1] == target_shape and output_shape[-1] >= 2:
        return -1
    return None


def rows_coupled(backend, loss_fn, output, key, logits, targets):
    """True when ``loss_fn``'s gradient for the first example moves with the other examples'
    targets: a loss that broadcasts ``(N, 1)`` against ``(N,)`` compares every output with
    every target. A per-example loss (one that squeezes or reshapes by itself) keeps them
    apart, and its layout is not questioned. ``logits`` (ndarray) sits at ``key`` in
    ``output``; ``targets`` is an ndarray of floats."""
    if targets.dtype.kind != "f" or len(targets) < 2:
        return False
    like = next((p for _, p in backend.named_parameters()), None)
    shifted = targets.copy()
    shifted[1:] += 1.0
    first_rows = []
    for values in (targets, shifted):
        grad = outputs.loss_gradient(backend, loss_fn, output, key, logits.copy(),
                                     backend.from_numpy(values, like=like))
        if grad is None:
            return False
        first_rows.append(grad[0])
    return not np.allclose(first_rows[0], first_rows[1], rtol=1e-5, atol=1e-12)
