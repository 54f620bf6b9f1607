"""UNSEEN_LAYERS (info) for a model trained without ever being called: its forward is called
directly, so the hooks on its modules never run."""
from ...findings import Finding
from ..probes.model_calls import ModelCalls


def model_never_called(view):
    """Gradients arrived on sampled steps, yet the model was never called and no module owning
    a parameter that got one was seen running: say which signals are missing rather than let
    their silence read as health. (A model whose training code calls its submodules, not the
    model, as a Lightning ``training_step`` may, has its layers seen: not this.)"""
    seen = view.signal(ModelCalls)
    samples = view.backward_samples
    if seen is None or seen.calls or seen.steps < 2 or not samples:
        return []
    owners = {p.module_name for p in view.layout.trainable
              if any(p.name in s.gradients for s in samples)}
    measured = {name.split("#")[0] for s in samples for name in s.activations}
    if not owners or owners & measured:
        return []
    return [Finding(
        "UNSEEN_LAYERS", "info", None,
        f"the model was trained for {seen.steps} steps without being called as model(x): "
        f"its forward() is called directly (layer.forward(x), as forward-forward nets write "
        f"it), and torch runs module hooks only in module(x), so what they measure is "
        f"missing: the model's input, its output and those of the layers its forward() runs "
        f"by .forward() too, with their checks (dead units, saturation, exploding or "
        f"collapsed activations, training mode); gradients, updates, the loss and the "
        f"optimizer's steps are still watched",
        "call the module itself, layer(x), instead of layer.forward(x): the same computation, "
        "and hooks (the Monitor's, and any other) run",
        {"steps": seen.steps})]


CHECKS = (model_never_called,)
