"""Learning-rate schedules stepped at another rate than the one their settings are in: a decay
consumed in a small part of the run or run past its end (per-epoch settings, stepped per
batch), and a warm-up that never hands over (per-step settings, stepped per epoch)."""
import numpy as np

from ...findings import Finding
from ..probes.schedule import COLLAPSED, FastSchedule, SlowWarmup


def schedule_too_fast(view):
    """LR_SCHEDULE_TOO_FAST: the learning rate fell to ~0 and stayed there for as long as the
    fall took, or its decay was done within the first quarter of the run since its peak, or it
    fell and climbed back cycle after cycle (``probes.schedule``). A schedule over the whole
    run (cosine to 0, OneCycle's final decay) reaches its end at the end of the run."""
    fast = view.signal(FastSchedule)
    if fast is None:
        return []
    steps = fast.collapse_step - fast.peak_step
    if fast.cycled:
        what = (f"the learning rate went from {fast.peak:.3g} down to {fast.lowest:.3g} and "
                f"climbed back above {0.5 * fast.peak:.3g} within "
                f"{fast.back_step - fast.peak_step} steps, and fell below 1% of its peak "
                f"{fast.cycles} times by step {fast.judged_step} (a full cycle of the schedule, "
                f"again and again)")
    elif fast.depth == COLLAPSED:
        what = (f"the learning rate fell from {fast.peak:.3g} to {fast.lowest:.3g} in "
                f"{fast.lowest_step - fast.peak_step} steps (below {COLLAPSED:g} of it "
                f"after {steps}) and stayed there")
    else:
        held = fast.judged_step - fast.collapse_step + 1
        what = (f"the learning rate fell from {fast.peak:.3g} below {fast.depth:g} of it in "
                f"{steps} steps and stayed there for the {held} steps since (its decay took "
                f"{steps / (steps + held):.0%} of the run after the peak; it is "
                f"{fast.lowest:.3g} at its lowest)")
    at_collapse = _loss_at(view.losses, fast.collapse_step)
    latest = _loss_at(view.losses, min(fast.judged_step, view.losses.size - 1))
    loss = (f", with the loss at {at_collapse:.3g} then and {latest:.3g} at step "
            f"{fast.judged_step}" if np.isfinite(at_collapse) and np.isfinite(latest) else "")
    scheduler = f" ({fast.scheduler})" if fast.scheduler else ""
    return [Finding(
        "LR_SCHEDULE_TOO_FAST", "warning", "optimizer",
        f"{what}{loss}: is scheduler.step(){scheduler} called every batch with per-epoch "
        f"settings (step_size/milestones/T_max in epochs)?",
        "call scheduler.step() once per epoch, after the batch loop; or keep it per batch and "
        "give the schedule its length in batches (step_size/milestones/T_max times the "
        "batches per epoch; OneCycleLR(total_steps=epochs * len(loader)))",
        {"peak_lr": fast.peak, "peak_step": fast.peak_step, "lowest_lr": fast.lowest,
         "lowest_step": fast.lowest_step, "collapse_step": fast.collapse_step,
         "steps_to_collapse": steps, "depth": fast.depth, "cycled": fast.cycled,
         "back_step": fast.back_step, "cycles": fast.cycles, "scheduler": fast.scheduler,
         "loss_at_collapse": at_collapse, "loss_now": latest})]


def warmup_never_ends(view):
    """LR_WARMUP_NEVER_ENDS: the rate climbs towards its scheduler's base rate one rise every
    few optimizer steps, at a pace that reaches the base only after twenty times the run so
    far (``probes.schedule``): a warm-up in optimizer steps, stepped once per epoch."""
    slow = view.signal(SlowWarmup)
    if slow is None:
        return []
    scheduler = f" ({slow.scheduler})" if slow.scheduler else ""
    return [Finding(
        "LR_WARMUP_NEVER_ENDS", "warning", "optimizer",
        f"the learning rate is {slow.lr:.3g}, {slow.lr / slow.base_lr:.1%} of the base rate "
        f"{slow.base_lr:.3g} its scheduler was built with, after {slow.optimizer_steps} "
        f"optimizer steps: it rose {slow.rises} times, once every {slow.steps_per_rise:.3g} "
        f"steps, a pace that reaches the base after about {slow.steps_to_base:,.0f} steps: "
        f"is a warm-up whose length is in optimizer steps (num_warmup_steps, total_iters) "
        f"stepped once per epoch{scheduler}?",
        "call scheduler.step() after every optimizer.step() (inside the batch loop) for a "
        "schedule built in optimizer steps, or give the warm-up its length in epochs",
        {"lr": slow.lr, "base_lr": slow.base_lr, "rises": slow.rises,
         "optimizer_steps": slow.optimizer_steps, "steps_per_rise": slow.steps_per_rise,
         "steps_to_base": slow.steps_to_base, "step": slow.step,
         "scheduler": slow.scheduler})]


def _loss_at(losses, step):
    """The median of up to 5 losses ending at ``step``; NaN when there are none."""
    if losses.size == 0 or step >= losses.size:
        return float("nan")
    end = losses.size if step == -1 else step + 1
    values = losses[max(0, end - 5):end]
    values = values[np.isfinite(values)]
    return float(np.median(values)) if values.size else float("nan")


CHECKS = (schedule_too_fast, warmup_never_ends)
