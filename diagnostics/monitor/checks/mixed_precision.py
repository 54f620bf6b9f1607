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

RECENT_STEPS = 64        # steps (with a scaler) over which the share of skipped steps is taken
SKIPPED_SHARE = 0.5      # AMP_OVERFLOW when at least this share of them was skipped
SCALE_FALL = 2.0 ** 10   # ... or when the scale fell this far below its reference
DEFAULT_SCALE = 2.0 ** 16  # GradScaler's default init_scale: healthy fp16 runs work near it
SKIPPED_SAMPLES = 3      # without a scaler: this many sampled steps skipped in a row...
SKIPPED_SPAN = 64        # ... over at least this many steps (more than finding a scale takes)

_FIX = ("train in bfloat16 instead (torch.autocast(device, dtype=torch.bfloat16): float32's "
        "range, no GradScaler needed); lower the learning rate (growing gradients overflow "
        "first); find the layer whose output passes float16's 65504 (the max column of the "
        "report's layer table) and run it in float32 (torch.autocast(device, enabled=False) "
        "around it, inputs .float()); a NaN in the data or the loss makes every step overflow")


def amp_overflow(view):
    state = view.signal(LossScaling)
    if state is None:
        return []
    return _with_scaler(state) if state.scaler else _without_scaler(state)


def _with_scaler(state):
    scales = state.scales
    if scales.size == 0:
        return []
    now, skipped = float(scales[-1]), state.skipped
    working = state.working_scale
    reference = max(working or 0.0, min(state.initial_scale, DEFAULT_SCALE))
    recent = skipped[-RECENT_STEPS:]
    share = float(recent.mean())
    counts = (f"{int(skipped.sum())} of {scales.size} steps were skipped "
              f"({int(recent.sum())} of the last {recent.size})")
    if now < 1:
        reason = (f"the GradScaler's scale collapsed to {now:.3g} (it started at "
                  f"{state.initial_scale:.4g}); {counts}: gradients overflow float16 even "
                  f"unscaled, so the optimizer hardly ever steps")
        severity = "error"
    elif recent.size >= RECENT_STEPS and share >= SKIPPED_SHARE:
        reason = (f"the GradScaler skipped {share:.0%} of the last {recent.size} steps "
                  f"(inf/NaN gradients in float16; scale now {now:.4g}); {counts}: the "
                  f"optimizer hardly ever steps")
        severity = "error"
    elif now <= reference / SCALE_FALL:
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


def _without_scaler(state):
    run = []
    for step, skipped in reversed(state.sampled):
        if not skipped:
            break
        run.append(step)
    if len(run) < SKIPPED_SAMPLES or run[0] - run[-1] < SKIPPED_SPAN:
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
