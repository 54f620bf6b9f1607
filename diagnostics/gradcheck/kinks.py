"""Finite differences that notice non-differentiable points (ReLU at 0, max-pool ties, abs).

A central difference across a kink averages two slopes; it is not a derivative. Two signs
give a kink away, and a smooth function shows neither:

* the central difference changes when the step shrinks (a kink crossed inside the step);
* the two one-sided slopes disagree, and keep disagreeing when the step shrinks (a kink at
  the point itself). On a smooth function they differ by step x curvature, which shrinks.

``estimate_slope`` measures with one step, and only when that disagrees with the analytic
value (or, without one, when the one-sided slopes differ) measures again with a step ten
times smaller to tell a kink from a wrong gradient. With ``forward_first`` it takes the step
forward alone first, and a forward difference that agrees with the analytic value is accepted:
one run instead of two, where a healthy model's derivatives nearly all end (a wrong gradient
would have to equal a one-sided slope to pass). The price: a kink just behind the point, which
the backward step would have crossed, is not seen, and the derivative is rightly called "ok"
where the two-step measurement calls it a kink. With ``confirm=False`` (details of a
tensor already known to be wrong) a disagreement whose one-sided slopes agree is taken as it
is: a kink crossed inside the step would make them differ by twice the disagreement.
"""
import math
from dataclasses import dataclass

import numpy as np

SHRINK = 10.0                                   # the second step is the first divided by this
ROUNDING = 64 * float(np.finfo(np.float64).eps)  # relative rounding error of one loss value
SPREAD_KEPT = 0.3                               # a kink keeps this much of its one-sided spread


@dataclass(frozen=True)
class Slope:
    """A derivative along one direction.

    ``status``: "ok" (agrees with ``analytic``, or measured cleanly when there is none),
    "mismatch" (disagrees, and the function is smooth there), or "kink" (``value`` is None).
    ``evaluations``: loss evaluations spent. ``closeness``: for a forward difference that
    agrees, ``|numerical - analytical|`` over the tolerance it had to meet (1 is the edge).
    """

    value: float | None
    status: str
    analytic: float | None
    evaluations: int
    closeness: float | None = None

    def relative_error(self):
        if self.value is None or self.analytic is None:
            return 0.0
        return relative_error(self.value, self.analytic)


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float

    def agrees(self, numerical, analytical, noise):
        return self.closeness(numerical, analytical, noise) <= 1.0

    def closeness(self, numerical, analytical, noise):
        """``|numerical - analytical|`` over the bound it must stay within."""
        bound = self.atol + self.rtol * max(abs(numerical), abs(analytical)) + noise
        difference = abs(numerical - analytical)
        return difference / bound if bound > 0 else (0.0 if difference == 0 else math.inf)


@dataclass(frozen=True)
class _Differences:
    central: float
    spread: float        # forward slope minus backward slope
    noise: float         # rounding error bound of the central difference
    spread_noise: float  # rounding error bound of the spread
    finite: bool


def estimate_slope(loss_at, loss_0, *, step, tolerance, analytic=None, confirm=True,
                   forward_first=False):
    """The derivative of ``loss_at(t)`` at ``t = 0`` (``loss_0``), told apart from kinks."""
    up = None
    if forward_first and analytic is not None:
        up = loss_at(step)
        forward, noise = _forward_difference(up, loss_0, step)
        if forward is not None:
            closeness = tolerance.closeness(forward, analytic, noise)
            if closeness <= 1.0:
                return Slope(forward, "ok", analytic, 1, closeness)
    first = _differences(loss_at, loss_0, step, up=up)
    if not first.finite:
        return Slope(None, "kink", analytic, 2)
    if analytic is not None and tolerance.agrees(first.central, analytic, first.noise):
        return Slope(first.central, "ok", analytic, 2)
    if analytic is None and _smooth(first, tolerance):
        return Slope(first.central, "ok", None, 2)
    if (not confirm and analytic is not None
            and abs(first.spread) <= first.spread_noise + 0.1 * abs(first.central - analytic)):
        return Slope(first.central, "mismatch", analytic, 2)
    second = _differences(loss_at, loss_0, step / SHRINK)
    if analytic is not None and second.finite and tolerance.agrees(
            second.central, analytic, second.noise):
        return Slope(second.central, "ok", analytic, 4)  # only the longer step crossed a kink
    if _kinked(first, second, tolerance):
        return Slope(None, "kink", analytic, 4)
    return Slope(first.central, "ok" if analytic is None else "mismatch", analytic, 4)


def relative_error(numerical, analytical):
    scale = max(abs(numerical), abs(analytical))
    return abs(numerical - analytical) / scale if scale > 0 else 0.0


def _forward_difference(up, loss_0, step):
    """``(slope, its rounding error bound)``; ``(None, None)`` when a loss is not finite."""
    if not (math.isfinite(up) and math.isfinite(loss_0)):
        return None, None
    rounding = ROUNDING * max(abs(loss_0), abs(up), 1e-300)
    return (up - loss_0) / step, 2 * rounding / step


def _differences(loss_at, loss_0, step, *, up=None):
    up = loss_at(step) if up is None else up
    down = loss_at(-step)
    finite = all(math.isfinite(v) for v in (up, down, loss_0))
    rounding = ROUNDING * max(abs(loss_0), abs(up), abs(down), 1e-300) if finite else 0.0
    return _Differences(
        central=(up - down) / (2 * step) if finite else math.nan,
        spread=((up - loss_0) - (loss_0 - down)) / step if finite else math.nan,
        noise=rounding / step, spread_noise=4 * rounding / step, finite=finite)


def _smooth(first, tolerance):
    """One-sided slopes that agree as closely as a smooth function's do."""
    return abs(first.spread) <= first.spread_noise + tolerance.rtol * abs(first.central)


def _kinked(first, second, tolerance):
    if not second.finite:
        return True
    moved = not tolerance.agrees(second.central, first.central, second.noise + first.noise)
    kept_spread = abs(second.spread) > second.spread_noise + SPREAD_KEPT * abs(first.spread)
    return moved or kept_spread
