"""Clipping before ``scaler.unscale_``: the threshold applied to gradients still multiplied by
the loss scale (CLIP_BEFORE_UNSCALE, seen at the call by ``probes/clipping.py``)."""
import math

from ...findings import Finding
from ..probes.clipping import ScaledClip


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


CHECKS = (clip_before_unscale,)
