"""Mixed precision: fp16 overflow that a GradScaler cannot absorb.

A GradScaler skips a step whose gradients overflowed and halves its scale; while it finds its
scale (a large ``init_scale``) the first steps are all skipped, and now and then one is. What
is not normal: the scale falling below 1 (even unscaled, float16 overflows), falling by 2**10
or more below the scale it started from (at most GradScaler's default 2**16: a larger
``init_scale`` is expected to come down) or from one at which steps went through, or most
recent steps skipped.

Two causes of a run that goes wrong under mixed precision although nothing overflows have
their own checks: clipping before ``scaler.unscale_`` (``checks/clipping.py``) and an
optimizer ``eps`` that the parameters' dtype rounds to 0 (``checks/optimizer_eps.py``).
"""
from ...findings import Finding
from ..probes.mixed_precision import LossScaling

# GradScaler's default init_scale: healthy fp16 runs work near it (torch's number, the
# reference a larger init_scale is judged from; the thresholds are in ``Thresholds.amp_*``)
DEFAULT_SCALE = 2.0 ** 16

_FIX = ("train in bfloat16 instead (torch.autocast(device, dtype=torch.bfloat16): float32's "
        "range, no GradScaler needed); lower the learning rate (growing gradients overflow "
        "first); find the layer whose output passes float16's 65504 (the max column of the "
        "report's layer table) and run it in float32 (torch.autocast(device, enabled=False) "
        "around it, inputs .float()); a NaN in the data or the loss makes every step overflow")


def amp_overflow(view):
    state = view.signal(LossScaling)
    if state is None:
        return []
    if state.scaler:
        return _with_scaler(state, view.thresholds)
    return _without_scaler(state, view.thresholds)


def _with_scaler(state, thresholds):
    scales = state.scales
    if scales.size == 0:
        return []
    now, skipped = float(scales[-1]), state.skipped
    working = state.working_scale
    reference = max(working or 0.0, min(state.initial_scale, DEFAULT_SCALE))
    recent = skipped[-thresholds.amp_recent_steps:]
    share = float(recent.mean())
    counts = (f"{int(skipped.sum())} of {scales.size} steps were skipped "
              f"({int(recent.sum())} of the last {recent.size})")
    if now < 1:
        reason = (f"the GradScaler's scale collapsed to {now:.3g} (it started at "
                  f"{state.initial_scale:.4g}); {counts}: gradients overflow float16 even "
                  f"unscaled, so the optimizer hardly ever steps")
        severity = "error"
    elif recent.size >= thresholds.amp_recent_steps and share >= thresholds.amp_skipped_share:
        reason = (f"the GradScaler skipped {share:.0%} of the last {recent.size} steps "
                  f"(inf/NaN gradients in float16; scale now {now:.4g}); {counts}: the "
                  f"optimizer hardly ever steps")
        severity = "error"
    elif now <= reference / thresholds.amp_scale_fall:
        where = ("at which steps went through" if reference == working
                 else "it started from")
        reason = (f"the GradScaler's scale fell to {now:.4g}, {reference / now:.3g} times "
                  f"below the {reference:.4g} {where}; {counts}: the gradients (or "
                  f"activations) are so large that float16 overflows at any usual scale")
        severity = "warning"
    else:
        return []
    return [Finding(
        "AMP_OVERFLOW", severity, None, f"fp16 overflow: {reason}", _FIX,
        {"scale": now, "initial_scale": state.initial_scale, "working_scale": working,
         "skipped_steps": int(skipped.sum()), "steps": int(scales.size),
         "recent_skipped_share": share, "autocast": state.autocast})]


def _without_scaler(state, thresholds):
    run = []
    for step, skipped in reversed(state.sampled):
        if not skipped:
            break
        run.append(step)
    if (len(run) < thresholds.amp_skipped_samples
            or run[0] - run[-1] < thresholds.amp_skipped_span):
        return []
    return [Finding(
        "AMP_OVERFLOW", "error", None,
        f"fp16 overflow: under float16 autocast the gradients held inf or NaN at each of the "
        f"last {len(run)} sampled steps (steps {run[-1]} to {run[0]}); a GradScaler skips "
        f"every such step, so the optimizer hardly ever steps (pass scaler= to the Monitor to "
        f"follow the scale)",
        _FIX,
        {"skipped_sampled_steps": run[::-1], "autocast": state.autocast})]


CHECKS = (amp_overflow,)
