"""The per-step tier's checks: the bad steps it judged (NaN/inf gradients, norm spikes), each
reported at the step it happened with where it came from, and the step guard's account of
what it did with them (``probes/step_gradients.py``, ``guard.py``)."""
import numpy as np

from ...findings import Finding
from ..probes.other_optimizer import TrainedElsewhere
from ..probes.step_gradients import StepGradients
from .advice import clip_gradients, lower_learning_rate


def nonfinite_batch(view):
    """DATA_NONFINITE: a bad step whose own batch holds NaN or inf (the root cause)."""
    state = view.signal(StepGradients)
    found = [b for b in state.bad if b.source == "data"] if state is not None else []
    if not found:
        return []
    first = found[0]
    return [Finding(
        "DATA_NONFINITE", "error", "data",
        f"{first.detail}: the gradient of step {first.step} is NaN or inf from it "
        f"({_what_became(first)})",
        f"find and drop or fix that example (np.isnan(x).any() per example; a division by a "
        f"zero std or a log(0) in preprocessing); validate_data(x, y) checks the whole set"
        f"{_guard_advice(state)}",
        {"step": first.step, "batches": list(first.batches), "detail": first.detail})]


DIVERGED = 1e3   # a loss this many times its first value before its gradient overflowed


def diverged_before(view):
    """LOSS_DIVERGING (error): the first step whose gradient went NaN or inf came after the loss
    had grown ``DIVERGED``-fold from its first value: the steps diverged (a learning rate far
    too high), and the overflow is where they ended. The root cause leads the report."""
    state = view.signal(StepGradients)
    found = [b for b in state.bad if b.reason == "nonfinite"] if state is not None else []
    if not found or found[0].source == "data":
        return []
    grown = _growth_before(view, found[0].step)
    if grown is None:
        return []
    (first_step, first), (peak_step, peak) = grown
    return [Finding(
        "LOSS_DIVERGING", "error", "loss",
        f"the loss grew from {first:.4g} at step {first_step} to {peak:.4g} at step {peak_step},"
        f" and at step {found[0].step} the gradient overflowed to NaN or inf: the steps "
        f"diverge",
        f"{lower_learning_rate(view)}; {clip_gradients(view)}",
        {"first_loss": first, "peak_loss": peak, "peak_step": peak_step,
         "overflow_step": found[0].step, "learning_rate": view.learning_rate})]


def _growth_before(view, step):
    losses = np.asarray(view.losses[:step + 1], dtype=np.float64)
    steps = np.flatnonzero(np.isfinite(losses))
    if steps.size < 2 or not losses[steps[0]] > 0:
        return None
    peak = steps[np.argmax(losses[steps])]
    if not losses[peak] > DIVERGED * losses[steps[0]]:
        return None
    return (int(steps[0]), float(losses[steps[0]])), (int(peak), float(losses[peak]))


def nonfinite_gradient(view):
    """EXPLODING_GRADIENTS (error): a step whose gradient holds NaN or inf, not from its
    batch's data and not a transient fault the replay cleared."""
    state = view.signal(StepGradients)
    if state is None:
        return []
    found = [b for b in state.bad if b.reason == "nonfinite" and b.source != "transient"]
    if not found:
        return []
    first = found[0]
    source = f"; {first.detail}" if first.detail else ""
    return [Finding(
        "EXPLODING_GRADIENTS", "error", first.parameter,
        f"the gradient holds NaN or inf at step {first.step} (batch {first.batches[1]}) in "
        f"{first.nonfinite} parameters, {first.parameter} the nearest the output{source} "
        f"({_what_became(first)})",
        _nonfinite_advice(view, first, state),
        {"step": first.step, "batches": list(first.batches), "parameter": first.parameter,
         "source": first.source, "suggested_clip": view.clip_value()})]


def gradient_spike(view):
    """EXPLODING_GRADIENTS (warning): a step whose gradient norm jumped far above the run's
    recent steps (``probes/step_gradients.py`` says how far is far)."""
    state = view.signal(StepGradients)
    if state is None:
        return []
    spikes = {b.step for b in state.bad if b.reason == "spike"}
    found = [b for b in state.bad if b.reason == "spike" and b.source != "transient"
             and not _game_swing(view, b, spikes)]
    if not found:
        return []
    first = found[0]
    source = f"; {first.detail}" if first.detail else ""
    return [Finding(
        "EXPLODING_GRADIENTS", "warning", first.parameter,
        f"the total gradient norm jumped to {first.norm:.4g} at step {first.step} (batch "
        f"{first.batches[1]}), {first.norm / first.median:.3g} times the median "
        f"{first.median:.4g} of the steps before; the largest is {first.parameter}'s"
        f"{source} ({_what_became(first)})",
        f"look at the batch of step {first.step} (an outlier or a corrupt example); "
        f"{clip_gradients(view)}; {lower_learning_rate(view)}{_guard_advice(state)}",
        {"step": first.step, "batches": list(first.batches), "gradient_norm": first.norm,
         "median_norm": first.median, "largest_parameter": first.parameter,
         "suggested_clip": view.clip_value()})]


def _game_swing(view, bad, spikes):
    """Whether a spike is the other player's move, not an explosion: the loss depends on tensors
    another optimizer keeps changing (a GAN's discriminator scores what the generator makes), and
    at the spike's step the loss itself rose above every loss of the steps the spike is judged
    against (those before the swing began: a run of spikes on consecutive steps is one swing). A
    discriminator that the generator has just fooled has a large loss, and the gradient of a
    loss near its floor grows with it (BCE's is ``sigmoid(z) - y``): the gradient followed the
    loss, which the game moved. A gradient that explodes on its own jumps at a loss that stays
    in its range, and stays reported; finite losses only."""
    elsewhere = view.signal(TrainedElsewhere)
    if elsewhere is None or not elsewhere.names:
        return False
    losses = np.asarray(view.losses, dtype=np.float64)
    if not 0 <= bad.step < losses.size or not np.isfinite(losses[bad.step]):
        return False
    start = bad.step
    while start - 1 in spikes:
        start -= 1
    before = losses[max(0, start - view.thresholds.spike_history):start]
    before = before[np.isfinite(before)]
    return (before.size >= view.thresholds.spike_min_history
            and losses[bad.step] > before.max())


def steps_skipped(view):
    """STEPS_SKIPPED: what the guard did, in the words of its first action (as every finding
    keeps the evidence that showed it first; ``monitor.skipped_steps`` lists them all): a
    step kept from being applied (a warning: its batch did not train the model), or a
    transient fault retried (an info)."""
    state = view.signal(StepGradients)
    if state is None or state.guard is None:
        return []
    skipped = [b for b in state.bad if b.action in ("skipped", "stopped")]
    retried = [b for b in state.bad if b.action == "retried"]
    if skipped:
        first = skipped[0]
        message = (f"the guard kept the optimizer step of step {first.step} (batch "
                   f"{first.batches[1]}, {_reason(first)}) from being applied: the parameters "
                   f"and the optimizer's state are as if it had not been taken "
                   f"(monitor.skipped_steps lists every skipped step)")
        advice = ("the finding this follows from says why the step was bad; fix that cause "
                  "(a skipped step's batch does not train the model)")
    elif retried:
        first = retried[0]
        message = (f"a transient fault at step {first.step}: {first.detail}; the step was "
                   f"retried with the replay's gradients")
        advice = ("nothing to change in the training code; faults that do not reproduce come "
                  "from the hardware or the environment: watch how often they happen")
    else:
        return []
    return [Finding(
        "STEPS_SKIPPED", "warning" if skipped else "info", "optimizer", message, advice,
        {"step": first.step, "batches": list(first.batches), "action": first.action,
         "skipped": [b.step for b in skipped], "retried": [b.step for b in retried]})]


def _reason(bad):
    return "NaN/inf gradient" if bad.reason == "nonfinite" else (
        f"norm {bad.norm / bad.median:.3g}x the median")


def _what_became(bad):
    return {"applied": "the optimizer applied it", "skipped": "skipped by the guard",
            "stopped": "the guard stopped the training before it",
            "retried": "retried"}[bad.action]


def _guard_advice(state):
    if state.guard is None:
        return ("; Monitor(guard='skip') keeps such a step from being applied (and "
                "guard_replay=True tells a transient fault from a reproducible one)")
    return ""


def _nonfinite_advice(view, first, state):
    if first.source == "loss":
        lead = ("look at the loss and the targets of that batch (a log(0), a division by "
                "zero, a target out of the loss's range)")
    elif first.source == "forward":
        lead = ("look at the forward of the module named in the message on that batch "
                "(a log or sqrt of a non-positive value, a division by zero, an overflow)")
    else:
        lead = (f"{lower_learning_rate(view)}; look for log(0), sqrt(0) or a division by zero "
                f"in forward or in the loss")
    return f"{lead}; {clip_gradients(view)}{_guard_advice(state)}"


CHECKS = (nonfinite_batch, diverged_before, nonfinite_gradient, gradient_spike, steps_skipped)
