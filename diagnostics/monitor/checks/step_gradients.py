"""The per-step tier's check (``Monitor(per_step_gradients=True)``): the latest step's
gradient norm, NaN/inf or a one-step spike, reported at the step it happened."""
import math

import numpy as np

from ...findings import Finding
from ..probes.step_gradients import StepGradients
from .advice import clip_gradients, lower_learning_rate


def gradient_spike(view):
    state = view.signal(StepGradients)
    if state is None or state.norms.size == 0:
        return []
    step, total = int(state.steps[-1]), float(state.norms[-1])
    if not math.isfinite(total):
        if state.loss_scaling:
            return []   # a step the GradScaler skips: counted by the mixed-precision probe
        broken = [name for name, norm in state.latest.items() if not math.isfinite(norm)]
        return [Finding(
            "EXPLODING_GRADIENTS", "error", broken[0],
            f"the gradient of {broken[0]} holds NaN or inf at step {step} ({len(broken)} "
            f"parameters affected), seen by the per-step tier after the optimizer's step",
            f"{clip_gradients(view)}; {lower_learning_rate(view)}; look for log(0) or "
            f"division by zero in forward; BatchNorm/LayerNorm",
            {"step": step, "parameters": broken, "suggested_clip": view.clip_value(),
             "calm_gradient_norms": int(view.calm_gradient_norms().size)})]
    history = state.norms[-view.thresholds.spike_history - 1:-1]
    history = history[np.isfinite(history)]
    if history.size < view.thresholds.spike_min_history:
        return []
    median = float(np.median(history))
    factor = view.thresholds.gradient_growth
    if not total > factor * median:
        return []
    largest = max(state.latest, key=state.latest.get)
    return [Finding(
        "EXPLODING_GRADIENTS", "warning", largest,
        f"the total gradient norm jumped to {total:.4g} at step {step}, {total / median:.3g} "
        f"times the median {median:.4g} of the {history.size} steps before (above "
        f"{factor:g}x); the largest is {largest}'s ({state.latest[largest]:.4g})",
        f"{clip_gradients(view)}; {lower_learning_rate(view)}; look for the batch of step "
        f"{step} (an outlier or a corrupt example)",
        {"step": step, "gradient_norm": total, "median_norm": median,
         "largest_parameter": largest, "suggested_clip": view.clip_value()})]


CHECKS = (gradient_spike,)
