"""Train/eval mode: dropout or batch norm left in training mode for a pass without gradients."""
from ...findings import Finding
from ..layout import display_name


def train_mode_at_eval(view):
    if not view.eval_passes:
        return []
    step, names = view.eval_passes[0]
    return [Finding(
        "TRAIN_MODE_AT_EVAL", "warning", names[0],
        f"a forward pass without gradients (evaluation?) ran at step {step} with "
        f"{', '.join(display_name(n) for n in names)} in training mode: dropout drops units "
        f"and batch norm uses the batch's statistics and updates its running averages",
        "call model.eval() before evaluating and model.train() before training again; "
        "torch.no_grad() does not switch modes",
        {"step": step, "modules": list(names), "passes": view.eval_pass_count})]


CHECKS = (train_mode_at_eval,)
