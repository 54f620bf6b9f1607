"""FROZEN_BATCHNORM_DRIFTS: frozen batch-norm layers that keep updating their statistics."""
from ...findings import Finding
from ..layout import display_name
from ..probes.frozen_norm import FrozenNormDrift

MIN_STEPS = 2    # sampled steps a layer was seen moving in train mode: not one odd pass


def frozen_batchnorm_drifts(view):
    drift = view.signal(FrozenNormDrift)
    if drift is None:
        return []
    layers = [layer for layer in drift.layers if layer.steps >= MIN_STEPS]
    if not layers:
        return []
    first = layers[0]
    names = ", ".join(display_name(layer.name) for layer in layers[:4])
    more = f" and {len(layers) - 4} more" if len(layers) > 4 else ""
    return [Finding(
        "FROZEN_BATCHNORM_DRIFTS", "warning", first.name,
        f"{len(layers)} of the {drift.frozen} batch-norm layers whose parameters are frozen "
        f"(requires_grad=False) are in train mode and keep updating their running mean and "
        f"variance from every batch ({names}{more}; first seen at step {first.first_step}): "
        f"the frozen layers' inputs are normalized with statistics that drift away from the "
        f"ones they were trained with, and model.eval() uses the drifted ones",
        "keep the frozen part's batch norms in eval mode while training: after each "
        "model.train(), call .eval() on them (or override the model's train() to do it), or "
        "replace them with torchvision.ops.FrozenBatchNorm2d; if the statistics are meant to "
        "adapt to the new data, nothing to do",
        {"layers": [layer.name for layer in layers], "frozen_batchnorm_layers": drift.frozen,
         "first_step": first.first_step, "steps_seen": [layer.steps for layer in layers]})]


CHECKS = (frozen_batchnorm_drifts,)
