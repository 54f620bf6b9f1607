"""Training in eval mode: ``model.eval()`` for validation, ``model.train()`` never called again."""
from ...findings import Finding
from ..kinds import BATCHNORM, DROPOUT, module_kind
from ..probes.training_mode import EvalModeTraining

def training_in_eval_mode(view):
    run = view.signal(EvalModeTraining)
    if run is None or run.steps < view.thresholds.eval_mode_min_steps:
        return []
    switched, first, steps = run.switch_step, run.first_step, run.steps
    off, effect = _mode_layers(view.layout)
    plural = " and " in off
    if run.ongoing:
        when = (f"{off} {'have' if plural else 'has'} been off for the last {steps} training "
                f"steps (from step {first})")
    else:
        when = (f"{off} {'were' if plural else 'was'} off for {steps} training steps from "
                f"step {first}, until the model was put back in train mode")
    return [Finding(
        "TRAINING_IN_EVAL_MODE", "warning", None,
        f"model.eval() was called for a pass without gradients (validation?) at step "
        f"{switched} and model.train() was not called again: {when}; {effect}",
        "call model.train() after validation (at the start of every training epoch or step)",
        {"switch_step": switched, "first_step": first, "steps": steps,
         "ongoing": run.ongoing, "modules": list(run.modules)})]


def _mode_layers(layout):
    """``("dropout and batch norm", what that does)``, for the modules the model has."""
    kinds = {module_kind(module) for _, module in layout.mode_modules}
    named = [(word, effect) for kind, word, effect in (
        (DROPOUT, "dropout", "the model trains without dropout's regularisation"),
        (BATCHNORM, "batch norm", "batch norm normalises with its frozen running statistics "
                                  "and stops updating them"))
             if kind in kinds]
    if not named:
        return "the mode-dependent layers", "the model trains as it would evaluate"
    return " and ".join(w for w, _ in named), "; ".join(e for _, e in named)


CHECKS = (training_in_eval_mode,)
