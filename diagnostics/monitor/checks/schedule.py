"""Learning-rate schedules stepped per batch with per-epoch settings."""
import numpy as np

from ...findings import Finding
from ..probes.schedule import COLLAPSE_FACTOR


def schedule_too_fast(view):
    """LR_SCHEDULE_TOO_FAST: the learning rate fell below ``COLLAPSE_FACTOR`` of its peak
    within a few dozen steps and stayed there, or cycled straight back up
    (``probes.schedule``). A schedule over the whole run (cosine to 0, OneCycle's final decay)
    takes longer to fall, or falls at the very end of the run."""
    fast = view.signals.get("fast_schedule")
    if fast is None:
        return []
    steps = fast.collapse_step - fast.peak_step
    if fast.cycled:
        what = (f"the learning rate went from {fast.peak:.3g} down to {fast.lowest:.3g} and "
                f"back above {0.5 * fast.peak:.3g} in {fast.back_step - fast.peak_step} steps "
                f"(a full cycle of the schedule)")
    else:
        what = (f"the learning rate fell from {fast.peak:.3g} to {fast.lowest:.3g} in "
                f"{fast.lowest_step - fast.peak_step} steps (below {COLLAPSE_FACTOR:g} of it "
                f"after {steps}) and stayed there")
    at_collapse, latest = _loss_at(view.losses, fast.collapse_step), _loss_at(view.losses, -1)
    loss = (f", with the loss at {at_collapse:.3g} then and {latest:.3g} now"
            if np.isfinite(at_collapse) and np.isfinite(latest) else "")
    return [Finding(
        "LR_SCHEDULE_TOO_FAST", "warning", "optimizer",
        f"{what}{loss}: is scheduler.step() called every batch with per-epoch settings "
        f"(step_size/T_max in epochs)?",
        "call scheduler.step() once per epoch, after the batch loop; or keep it per batch and "
        "give the schedule its length in batches (step_size/T_max times the batches per "
        "epoch; OneCycleLR(total_steps=epochs * len(loader)))",
        {"peak_lr": fast.peak, "peak_step": fast.peak_step, "lowest_lr": fast.lowest,
         "lowest_step": fast.lowest_step, "collapse_step": fast.collapse_step,
         "steps_to_collapse": steps, "cycled": fast.cycled, "back_step": fast.back_step,
         "loss_at_collapse": at_collapse, "loss_now": latest})]


def _loss_at(losses, step):
    """The median of up to 5 losses ending at ``step``; NaN when there are none."""
    if losses.size == 0 or step >= losses.size:
        return float("nan")
    end = losses.size if step == -1 else step + 1
    values = losses[max(0, end - 5):end]
    values = values[np.isfinite(values)]
    return float(np.median(values)) if values.size else float("nan")


CHECKS = (schedule_too_fast,)
