"""Shared wording for suggestions: a learning rate 10x lower, a clip value from the history."""
from ..probes.schedule import PeakLearningRate


def lower_learning_rate(view):
    """10x lower than the rate set: the schedule's peak when it has decayed since (at the end
    of a linear decay the rate now is 0, and a tenth of it no advice)."""
    lr = view.learning_rate
    if lr is None:
        return "lower the learning rate (try 10x lower)"
    peak = view.signal(PeakLearningRate)
    peak = peak.value if peak is not None else None
    if peak is not None and peak > 2 * lr:
        return (f"lower the learning rate 10x (its peak lr={peak:g} -> {peak / 10:g}; the "
                f"schedule has it at {lr:g} now)")
    return f"lower the learning rate 10x (lr={lr:g} -> {lr / 10:g})"


def clip_gradients(view):
    clip = view.clip_value()
    if clip is None:
        return ("clip gradients with torch.nn.utils.clip_grad_norm_(model.parameters(), "
                "max_norm=1.0) (no calm gradient history yet to pick a value from)")
    return (f"clip gradients with torch.nn.utils.clip_grad_norm_(model.parameters(), "
            f"max_norm={clip:.3g}) (the {view.thresholds.clip_percentile:g}th percentile of "
            f"the gradient norms seen, as AutoClip does)")
