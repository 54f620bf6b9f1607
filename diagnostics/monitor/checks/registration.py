"""Layers the model does not register: tensors with gradients that nothing ever updates."""
from ...findings import Finding
from ..probes.unregistered import UnregisteredParameters

_SHAPES_SHOWN = 6


def unregistered_parameters(view):
    """Leaf tensors that the loss's graph reaches (they get a ``.grad``) but that are neither
    the model's parameters nor in the optimizer, seen unchanged at several sampled steps
    (``probes/unregistered.py``): the optimizer never trains them."""
    signal = view.signal(UnregisteredParameters)
    found = signal.found if signal is not None else ()
    if not found:
        return []
    shapes = [_shape(tensor.shape) for tensor in found]
    shown = ", ".join(shapes[:_SHAPES_SHOWN]) + (", ..." if len(shapes) > _SHAPES_SHOWN else "")
    first = min(tensor.first_step for tensor in found)
    last = max(tensor.last_step for tensor in found)
    count = len(found)
    tensors = "1 tensor that receives" if count == 1 else f"{count} tensors that receive"
    return [Finding(
        "UNREGISTERED_PARAMETERS", "warning", None,
        f"{tensors} gradients ({shown}) {'is' if count == 1 else 'are'} not "
        f"{'a parameter' if count == 1 else 'parameters'} of the model nor in the optimizer, "
        f"and never changed from step {first} to step {last}: model.parameters() and the "
        f"optimizer do not see {'it' if count == 1 else 'them'}, so "
        f"{'it stays' if count == 1 else 'they stay'} at {'its' if count == 1 else 'their'} "
        f"initial values",
        "layers kept in a plain Python list or dict are not registered: use nn.ModuleList / "
        "nn.ModuleDict (a tensor attribute: nn.Parameter); a network meant to stay fixed (a "
        "teacher) should run under torch.no_grad() or have requires_grad_(False)",
        {"tensors": count, "shapes": [list(tensor.shape) for tensor in found],
         "first_step": first, "last_step": last})]


def _shape(shape):
    return "x".join(str(size) for size in shape) if shape else "scalar"


CHECKS = (unregistered_parameters,)
