"""Patterns of a wrong gradient: how the analytic gradient relates to the true one.

Most backward bugs make the analytic gradient a simple linear function T of the true one:
a sign flip (-1), a constant scale (k), a mean where a sum belongs (1/N, N the batch size),
a transpose, rows or elements zeroed (a 0/1 mask). A pattern is tested along random unit
directions u through ``<analytic, u> = <true, T*(u)>`` (T* the adjoint of T), so the true
gradient is needed only as directional derivatives: two loss evaluations each, whatever the
tensor's size. ``classify`` takes that measurement as a function; ``classify_arrays`` uses
two arrays when the true gradient is known element by element.

One more pattern belongs to a layer's input gradient: a backward that applies the layer's
Jacobian J instead of its transpose (``W`` where ``W.T`` belongs in a square ``Linear``). It
is tested against ``J @ grad_output``, measured by perturbing the layer's input along the
gradient its output receives.
"""
from dataclasses import dataclass

import numpy as np

from ..jsonable import to_jsonable

KINDS = ("sign flip", "transpose", "scale", "mean instead of sum", "sum instead of mean",
         "zeroed", "unexplained")
RTOL = 1e-3      # a pattern must predict the analytic gradient this closely
CONFIRM = 2      # random directions that must confirm a pattern
_TRIES = 6       # directions drawn before giving up on measurements that hit kinks
_ROWS_REFINED = 16  # zero rows looked at one by one to tell wrongly zeroed rows from right ones


@dataclass(frozen=True)
class Pattern:
    """``kind`` (one of ``KINDS``), ``factor`` for scales, and a ``detail`` in words."""

    kind: str
    factor: float | None = None
    detail: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Pattern.kind: expected one of {KINDS}, got {self.kind!r}")

    def __str__(self):
        if self.kind == "sign flip":
            return "sign flip (factor -1)"
        if self.kind == "scale":
            return f"scale (factor {_format_factor(self.factor)})"
        if self.kind in ("mean instead of sum", "sum instead of mean", "zeroed", "transpose"):
            return f"{self.kind} ({self.detail})" if self.detail else self.kind
        return self.kind

    @property
    def hint(self):
        """What such a bug usually is, for a finding's suggestion."""
        return _HINTS[self.kind]

    def to_dict(self):
        return to_jsonable({"kind": self.kind, "factor": self.factor, "detail": self.detail,
                            "text": str(self)})


_HINTS = {
    "sign flip": "a sign error: minus the gradient returned (a `-` too many, or `a - b` where "
                 "`b - a` belongs)",
    "transpose": "a transposed matrix: `W` where `W.T` belongs (or the other way round), or "
                 "the operands of a product swapped",
    "scale": "a constant factor missing or extra (the 2 of x**2, a 1/N)",
    "mean instead of sum": "a mean over the batch where the forward sums (`.mean(0)` where "
                           "`.sum(0)` belongs)",
    "sum instead of mean": "a sum over the batch where the forward averages (a missing "
                           "division by the batch size)",
    "zeroed": "a mask, slice or index range that drops part of the gradient",
    "unexplained": "a term that differs from the derivative of the forward (a forgotten mean "
                   "or variance term of a normalization, the `1 - y` of a sigmoid)",
}


def classify(analytic, true_slope, *, rng, batch_size=None, jacobian_product=None,
             measured=()):
    """The pattern relating ``analytic`` to the true gradient.

    ``true_slope(w)`` is ``<true gradient, w>`` (None where it cannot be measured);
    ``jacobian_product``, when given, is ``J @ grad_output`` for a layer's input gradient.
    ``measured``: ``(u, <true gradient, u>)`` pairs known already along random unit
    directions drawn as ``rng`` would draw them (a check's directional probes); they are the
    first directions tried, each once, and ``true_slope`` is not asked again along them.
    """
    analytic = np.asarray(analytic, dtype=np.float64)
    rng = _Draws(rng, [u for u, _ in measured])
    true_slope = _remembering(true_slope, measured)
    if not np.any(analytic):
        return Pattern("zeroed", 0.0, "all elements")
    if jacobian_product is not None and _close(analytic, jacobian_product):
        return Pattern("transpose", detail="the layer's Jacobian applied, not its transpose")
    factor = _fit_scale(analytic, true_slope, rng)
    if factor is not None:
        return _scale_pattern(factor, batch_size)
    if analytic.ndim == 2 and analytic.shape[0] == analytic.shape[1] > 1 and _fits(
            analytic, true_slope, rng, adjoint=np.transpose):
        return Pattern("transpose", detail="the gradient transposed")
    zero = analytic == 0
    for mask in _zero_masks(zero):
        if _fits(analytic, true_slope, rng, adjoint=lambda u, kept=~mask: u * kept):
            return Pattern("zeroed", detail=_describe_zeros(
                _drop_right_rows(mask, analytic, true_slope, rng)))
    return Pattern("unexplained")


def classify_arrays(numerical, analytical, *, batch_size=None, seed=0):
    """``classify`` with the true gradient known element by element (``numerical``)."""
    numerical = np.asarray(numerical, dtype=np.float64)
    return classify(analytical, lambda w: float(np.vdot(numerical, w)),
                    rng=np.random.default_rng(seed), batch_size=batch_size)


def _fit_scale(analytic, true_slope, rng):
    """``k`` with analytic = k * true along every direction tried, else None."""
    factor = None
    for u in _directions(analytic.shape, rng):
        measured = true_slope(u)
        if measured is not None and abs(measured) > 1e-9 * _typical(analytic):
            factor = float(np.vdot(analytic, u)) / measured
            break
    if factor is None or abs(factor - 1.0) <= RTOL:
        return None
    return factor if _fits(analytic, true_slope, rng, adjoint=lambda u: factor * u) else None


def _fits(analytic, true_slope, rng, *, adjoint):
    """``<analytic, u> == <true, adjoint(u)>`` along ``CONFIRM`` random directions."""
    confirmed = 0
    for u in _directions(analytic.shape, rng):
        mapped = adjoint(u)
        measured = 0.0 if not np.any(mapped) else true_slope(mapped)
        if measured is None:
            continue
        predicted = float(np.vdot(analytic, u))
        scale = max(abs(predicted), abs(measured), _typical(analytic))
        if abs(predicted - measured) > RTOL * scale:
            return False
        confirmed += 1
        if confirmed == CONFIRM:
            return True
    return False


def _directions(shape, rng):
    for _ in range(_TRIES):
        known = rng.known(shape)
        if known is not None:
            yield known
            continue
        u = rng.standard_normal(shape)
        yield u / np.linalg.norm(u)


class _Draws:
    """A generator that hands out the directions ``known`` first (each once, where the shape
    fits), then random ones."""

    def __init__(self, rng, known):
        self.rng, self.queue = rng, list(known)

    def known(self, shape):
        if self.queue and np.shape(self.queue[0]) == tuple(shape):
            return self.queue.pop(0)
        return None

    def standard_normal(self, shape):
        return self.rng.standard_normal(shape)


def _remembering(true_slope, measured):
    """``true_slope`` that answers from ``measured`` along a multiple of a known direction."""
    def along(w):
        for u, value in measured:
            if np.shape(w) != np.shape(u):
                continue
            c = float(np.vdot(w, u))
            if np.max(np.abs(w - c * u)) <= 1e-12 * np.max(np.abs(w)):
                return c * value
        return true_slope(w)

    return along if measured else true_slope


def _typical(array):
    """The typical size of ``<array, u>`` for a random unit ``u``."""
    return float(np.linalg.norm(array)) / np.sqrt(array.size)


def _close(analytic, other):
    other = np.asarray(other, dtype=np.float64)
    if other.shape != analytic.shape:
        return False
    scale = max(np.linalg.norm(analytic), np.linalg.norm(other))
    return bool(np.linalg.norm(analytic - other) <= RTOL * scale)


def _scale_pattern(factor, batch_size):
    if abs(factor + 1.0) <= RTOL:
        return Pattern("sign flip", -1.0)
    if abs(factor) <= RTOL:
        return Pattern("zeroed", 0.0, "all elements")
    if batch_size and batch_size > 1:
        if abs(factor * batch_size - 1.0) <= RTOL:
            return Pattern("mean instead of sum", factor,
                           f"factor 1/{batch_size}, batch size {batch_size}")
        if abs(factor / batch_size - 1.0) <= RTOL:
            return Pattern("sum instead of mean", factor,
                           f"factor {batch_size}, batch size {batch_size}")
    return Pattern("scale", factor)


def _format_factor(factor):
    text = f"{factor:.4g}"
    inverse = 1.0 / factor if factor else 0.0
    whole = round(inverse)
    if abs(whole) >= 2 and abs(inverse - whole) <= RTOL * abs(inverse):
        text += f" = 1/{whole}"
    return text


def _zero_masks(zero):
    """Candidate sets of wrongly zeroed elements: whole zero rows first, then every zero."""
    if not zero.any() or zero.all():
        return []
    masks = []
    if zero.ndim >= 2:
        rows = zero.reshape(zero.shape[0], -1).all(axis=1)
        if rows.any():
            masks.append(np.broadcast_to(rows.reshape((-1,) + (1,) * (zero.ndim - 1)),
                                         zero.shape))
    if not masks or not np.array_equal(masks[0], zero):
        masks.append(zero)
    return masks


def _drop_right_rows(mask, analytic, true_slope, rng):
    """``mask`` without the zero rows whose true gradient is zero too (rightly zero rows).

    Each row costs one directional measurement, so only up to ``_ROWS_REFINED`` are looked at.
    """
    if mask.ndim < 2:
        return mask
    rows = np.flatnonzero(mask.reshape(mask.shape[0], -1).all(axis=1))
    if not 1 < len(rows) <= _ROWS_REFINED:
        return mask
    wrong = np.array(mask)
    for row in rows:
        u = np.zeros(analytic.shape)
        u[row] = rng.standard_normal(analytic.shape[1:])
        measured = true_slope(u / np.linalg.norm(u))
        if measured is not None and abs(measured) <= RTOL * _typical(analytic):
            wrong[row] = False
    return wrong if wrong.any() else mask


def _describe_zeros(zeroed):
    """``rows [3, 7] of 8`` when whole rows are zero, else ``5 of 128 elements``."""
    count = int(zeroed.sum())
    if zeroed.ndim >= 2:
        rows = [int(r) for r in np.flatnonzero(zeroed.reshape(zeroed.shape[0], -1).all(axis=1))]
        if rows and count == len(rows) * (zeroed.size // zeroed.shape[0]):
            return zeroed_rows_text(rows, zeroed.shape[0])
    return f"{count} of {zeroed.size} elements"


def zeroed_rows_text(rows, total):
    """How a "zeroed" pattern of whole rows reads: ``rows [3, 7] of 8``."""
    shown = ", ".join(str(r) for r in rows[:8]) + (", ..." if len(rows) > 8 else "")
    return f"rows [{shown}] of {total}"
