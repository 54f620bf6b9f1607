"""How class-index targets meet class scores, in the layouts recognised without the loss.

``(N, C, ...)`` scores with ``(N, ...)`` targets (torch's ``cross_entropy``), and
``(N, ..., C)`` scores with ``(N, ...)`` targets (the sequence-model layout: logits ``(B, T,
V)``, labels ``(B, T)``, a loss that flattens both). Anything else is left to the user's loss
function, which is the authority on how its arguments meet.
"""


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


def class_count(output_shape, axis):
    return int(tuple(output_shape)[axis])
