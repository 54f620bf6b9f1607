"""Mixed precision: fp16 overflow that a GradScaler cannot absorb.

A GradScaler skips a step whose gradients overflowed and halves its scale; while it finds its
scale (a large ``init_scale``) the first steps are all skipped, and now and then one is. What
is not normal: the scale falling below 1 (even unscaled, float16 overflows), falling by 2**10
or more below the scale it started from (at most GradScaler's default 2**16: a larger
``init_scale`` is expected to come down) or from one at which steps went through, or most
recent steps skipped.

Two causes of a run that goes wrong under mixed precision although nothing overflows:
clipping before ``scaler.unscale_`` (CLIP_BEFORE_UNSCALE, seen at the call by
``probes/clipping.py``) and an optimizer ``eps`` that the parameters' dtype rounds to 0
(EPS_UNDERFLOWS, read off the param groups by ``probes/optimizer_eps.py``).
"""
import math

from ...findings import Finding
from ..probes.clipping import ScaledClip
from ..probes.mixed_precision import LossScaling
from ..probes.optimizer_eps import EpsUnderflow

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


def clip_before_unscale(view):
    found = view.signal(ScaledClip)
    if found is None or found.scale == 1:      # a scale of 1 multiplies nothing
        return []
    scale, limit, step = found.scale, found.limit, found.step
    known = math.isfinite(scale)
    name = "max_norm" if found.function == "clip_grad_norm_" else "clip_value"
    scaled = f"the loss scale {scale:.6g}" if known else "the GradScaler's loss scale"
    message = (f"{found.function}({name}={limit!r}) ran on gradients still multiplied by "
               f"{scaled}: scaler.unscale_(optimizer) had not been called before it at step "
               f"{step}")
    if known and found.function == "clip_grad_value_":
        message += (f"; it clips each gradient at {limit!r} / {scale:.6g} = "
                    f"{limit / scale:.3g} in the units the optimizer applies")
    elif known:
        message += (f"; its threshold, in the gradients' true units, is {limit!r} / "
                    f"{scale:.6g} = {limit / scale:.3g}")
        if found.total_norm > limit:
            true_norm = found.total_norm / scale
            intended = min(true_norm, limit)
            message += (f": it measured a norm of {found.total_norm:.4g} ({true_norm:.4g} "
                        f"unscaled) and the optimizer applied gradients of norm "
                        f"{limit / scale:.3g} instead of {intended:.4g}, "
                        f"{intended * scale / limit:.6g} times too small")
    message += "; the updates are tiny and the loss hardly falls"
    return [Finding(
        "CLIP_BEFORE_UNSCALE", "warning", "optimizer", message,
        "call scaler.unscale_(optimizer) after backward and before clipping (scaler.step "
        "then does not unscale them again); the threshold then applies to the true gradients",
        {"function": found.function, "limit": limit, "scale": scale,
         "total_norm": found.total_norm, "step": step})]


def eps_underflows(view):
    underflow = view.signal(EpsUnderflow)
    return [eps_finding(lost) for lost in underflow.lost] if underflow is not None else []


def eps_finding(lost):
    """The EPS_UNDERFLOWS finding for one ``probes.optimizer_eps.LostEps`` (also preflight's)."""
    if lost.value == 0:
        held = f"is 0 in {lost.dtype}"
        effect = "sqrt(v) + eps is exactly 0 and the update m / 0 is inf or NaN"
    else:
        held = (f"is {lost.value:.3g} in {lost.dtype} (a subnormal "
                f"{abs(lost.value - lost.eps) / lost.eps:.0%} off)")
        effect = (f"the update divides by {lost.value:.3g}, not by the eps set, and "
                  f"jumps by m / eps")
    fix = f"1e{math.ceil(math.log10(lost.tiny))}"     # float16: 1e-4
    return Finding(
        "EPS_UNDERFLOWS", "warning", "optimizer",
        f"{lost.optimizer}'s eps={lost.eps:g} {held}, the dtype of {lost.tensors} of its "
        f"parameter tensors ({lost.values:,} values): wherever v, the running mean of "
        f"squared gradients kept in {lost.dtype}, underflows to 0 (small gradients), "
        f"{effect}",
        f"set eps={fix} (at least {lost.dtype}'s smallest normal, {lost.tiny:.3g}) for pure "
        f"{lost.dtype} weights; or keep the weights in float32 and compute in "
        f"{lost.dtype} under torch.autocast (with a GradScaler for float16): the optimizer "
        f"then works in float32",
        {"optimizer": lost.optimizer, "eps": lost.eps, "dtype": lost.dtype,
         "eps_in_dtype": lost.value, "tensors": lost.tensors, "values": lost.values,
         "param_groups": list(lost.groups)})


CHECKS = (amp_overflow, clip_before_unscale, eps_underflows)
