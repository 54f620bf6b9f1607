"""Shared wording for suggestions: a learning rate 10x lower, a clip value from the history."""


def lower_learning_rate(view):
    lr = view.learning_rate
    if lr is None:
        return "lower the learning rate (try 10x lower)"
    return f"lower the learning rate 10x (lr={lr:g} -> {lr / 10:g})"


def clip_gradients(view):
    clip = view.clip_value()
    if clip is None:
        return ("clip gradients with torch.nn.utils.clip_grad_norm_(model.parameters(), "
                "max_norm=1.0) (no calm gradient history yet to pick a value from)")
    return (f"clip gradients with torch.nn.utils.clip_grad_norm_(model.parameters(), "
            f"max_norm={clip:.3g}) (the {view.thresholds.clip_percentile:g}th percentile of "
            f"the gradient norms seen, as AutoClip does)")
