"""An optimizer ``eps`` that the dtype of its parameters cannot hold.

Adam (and RMSprop, Adagrad, ...) divides by ``sqrt(v) + eps`` computed in the parameters'
dtype. In float16 ``1e-8`` is 0 (the smallest float16 is 6e-8), so wherever ``v`` underflows
(small gradients) the denominator is exactly 0 and the update inf or NaN. Static: read once
from the optimizer's param groups when the Monitor attaches, so the finding comes at the
first step, before the NaN. A group with ``fused=True`` computes in float32 and is skipped.
"""
import math
import numbers
from dataclasses import dataclass

import numpy as np

from .base import Probe, Signal

LOST = 0.1     # eps is lost when its value in the dtype is 0 or this far off (relative)


@dataclass(frozen=True)
class LostEps:
    """One (eps, dtype) the optimizer cannot apply: the value it gets instead, and on what."""

    optimizer: str         # the optimizer's class name
    eps: float
    dtype: str             # "float16", ...
    value: float           # eps in that dtype (0.0: it underflowed)
    tensors: int           # the optimizer's trainable tensors of that dtype in those groups
    values: int            # their elements
    groups: tuple          # the param groups' indices
    tiny: float            # the dtype's smallest normal number: an eps from here on is kept


@dataclass(frozen=True)
class EpsUnderflow(Signal):
    """The signal of EPS_UNDERFLOWS: every (eps, dtype) of the optimizer that is lost."""

    lost: tuple[LostEps, ...]


def lost_eps(optimizer):
    """``[LostEps]`` for every eps and dtype of ``optimizer``'s groups where eps is lost."""
    found = {}
    for index, group in enumerate(getattr(optimizer, "param_groups", None) or ()):
        eps = group.get("eps")
        if (not isinstance(eps, numbers.Real) or isinstance(eps, bool) or not eps > 0
                or group.get("fused")):
            continue
        for param in group.get("params", ()):
            if not getattr(param, "requires_grad", True):
                continue
            value = _in_dtype(float(eps), param.dtype)
            if value is None or (value != 0 and abs(value - eps) <= LOST * eps):
                continue
            key = (float(eps), _dtype_name(param.dtype))
            tensors, values, groups, _, _ = found.get(key, (0, 0, (), value, None))
            found[key] = (tensors + 1, values + _numel(param),
                          groups if index in groups else groups + (index,), value,
                          _tiny(param.dtype))
    name = type(optimizer).__name__
    return [LostEps(optimizer=name, eps=eps, dtype=dtype, value=value, tensors=tensors,
                    values=values, groups=groups, tiny=tiny)
            for (eps, dtype), (tensors, values, groups, value, tiny) in found.items()]


def _in_dtype(eps, dtype):
    """``eps`` rounded to the floating ``dtype`` (torch or NumPy), or None for another dtype."""
    if isinstance(dtype, np.dtype):
        return float(np.asarray(eps, dtype=dtype)) if dtype.kind == "f" else None
    if not getattr(dtype, "is_floating_point", False):
        return None
    import torch

    value = float(torch.tensor(eps, dtype=dtype))
    return value if math.isfinite(value) else None


def _tiny(dtype):
    if isinstance(dtype, np.dtype):
        return float(np.finfo(dtype).tiny)
    import torch

    return float(torch.finfo(dtype).tiny)


def _dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def _numel(param):
    numel = getattr(param, "numel", None)
    return int(numel() if callable(numel) else np.prod(param.shape))


class OptimizerEpsProbe(Probe):
    publishes = (EpsUnderflow,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.lost = None

    def begin(self):
        if self.lost is None:      # once, at attach (guarded: an odd optimizer cannot stop it)
            self.lost = []
            if self.ctx.optimizer is not None:
                self.lost = lost_eps(self.ctx.optimizer)

    def signals(self):
        return (EpsUnderflow(tuple(self.lost)),) if self.lost else ()
