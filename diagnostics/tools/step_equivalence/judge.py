"""What a step's gradient is, in terms of the batch's parts: pure functions on flat vectors.

The step's gradient ``g`` is fitted as ``sum_k u_k g_k`` over the gradients ``g_k`` of the loss
on each distinct part the step fed the model (least squares: exact, up to rounding, when the
step is such a combination). The documented weights ``w_k`` are those that make the parts add
up to the loss on the whole batch (fitted the same way from the whole batch's gradient: each
part's share of the rows for a mean over rows, of the scored tokens for a mean over tokens).
The pattern is read from ``u`` against ``w``: rows never fed or parts weighted 0 (dropped),
a part fed twice or weighted double (twice), all parts weighted alike where their shares differ
(weighted equally), ``u = c w`` (scaled by c).
"""
from dataclasses import dataclass

import numpy as np

SCALED, EQUAL, DROPPED, TWICE, OTHER = ("scaled", "weighted equally", "dropped", "twice",
                                        "other")


@dataclass(frozen=True)
class Part:
    """Rows of the batch the step fed the model together, ``times`` times."""

    rows: tuple[int, ...]
    times: int

    @property
    def label(self):
        """``rows 0-7`` for a run of rows, else ``8 rows (3, 9, ...)``."""
        rows = self.rows
        if rows == tuple(range(rows[0], rows[0] + len(rows))):
            return f"rows {rows[0]}-{rows[-1]}" if len(rows) > 1 else f"row {rows[0]}"
        shown = ", ".join(str(r) for r in rows[:3])
        return f"{len(rows)} rows ({shown}, ...)"


@dataclass(frozen=True)
class Judgement:
    """``pattern``: None when the step computes the objective, else one of SCALED, EQUAL,
    DROPPED, TWICE, OTHER. ``difference``: ||g - ref|| / ||ref||. ``factor``: the scale for
    SCALED. ``weights``/``documented``: per part (``parts``), when the parts were fitted.
    ``missing``: batch rows the step never fed the model; ``lost``/``doubled``: rows it fed
    whose loss weighs 0 / twice its share in the step."""

    pattern: str | None
    difference: float
    factor: float | None = None
    parts: tuple[Part, ...] = ()
    weights: tuple[float, ...] = ()
    documented: tuple[float, ...] = ()
    missing: tuple[int, ...] = ()
    lost: tuple[Part, ...] = ()
    doubled: tuple[Part, ...] = ()


@dataclass(frozen=True)
class Decomposition:
    """The batch cut into atoms, the rows that the same parts hold (the missing rows, fed by
    none, are one more): ``shares[p][a]``, how much of atom ``a``'s loss gradient part ``p``'s
    holds; ``documented[a]``, the atom's weight in the whole batch's loss."""

    atoms: tuple[Part, ...]
    shares: np.ndarray
    documented: np.ndarray

    @property
    def part_documented(self):
        """Each part's weight in the whole batch's loss (its atoms', as it holds them)."""
        return self.shares @ self.documented


def relative(a, b):
    """||a - b|| / ||b|| (0 for two zero vectors, inf against a zero ``b``)."""
    scale = float(np.linalg.norm(b))
    gap = float(np.linalg.norm(a - b))
    return gap / scale if scale > 0 else (0.0 if gap == 0 else float("inf"))


def fit(target, columns):
    """``(weights, relative residual)`` of ``target ~ columns @ weights``."""
    matrix = np.stack(columns, axis=1)
    weights, *_ = np.linalg.lstsq(matrix, target, rcond=None)
    return weights, relative(matrix @ weights, target)


def scale_of(gradient, reference, tolerance):
    """The factor c with ``gradient = c * reference`` (within ``tolerance``), else None."""
    norm = float(reference @ reference)
    if norm == 0:
        return None
    factor = float(gradient @ reference) / norm
    return factor if relative(gradient, factor * reference) <= tolerance else None


def by_scale(gradient, reference, tolerance):
    """A Judgement from the whole-batch gradient alone (the parts unknown)."""
    difference = relative(gradient, reference)
    if difference <= tolerance:
        return Judgement(None, difference)
    factor = scale_of(gradient, reference, tolerance)
    if factor is not None and factor > 0:
        return Judgement(SCALED, difference, factor=factor)
    return Judgement(OTHER, difference)


def by_parts(gradient, reference, parts, user_columns, decomposition, tolerance):
    """A Judgement from the parts: ``user_columns[k]``, the loss's gradient on ``parts[k]`` in
    the modes the step fed it; ``decomposition``, how the parts and the whole batch's loss are
    made of the batch's atoms."""
    difference = relative(gradient, reference)
    weights, residual = fit(gradient, user_columns)
    atoms = decomposition.atoms
    found = dict(difference=difference, parts=tuple(parts), weights=tuple(map(float, weights)),
                 documented=tuple(map(float, decomposition.part_documented)))
    if residual > tolerance:
        return Judgement(OTHER if difference > tolerance else None, **found)
    close = 10 * tolerance
    effective = weights @ decomposition.shares          # each atom's weight in the step
    documented = decomposition.documented
    fed = [atom.times > 0 for atom in atoms]
    counted = [d != 0 and f for d, f in zip(documented, fed)]
    ratios = np.array([e / d if c else np.nan for e, d, c in zip(effective, documented, counted)])
    missing = tuple(row for atom, f in zip(atoms, fed) if not f for row in atom.rows)
    scale = np.nanmax(np.abs(ratios)) if np.any(counted) else 0.0
    lost = tuple(a for a, r, c in zip(atoms, ratios, counted) if c and abs(r) <= close * scale)
    found.update(missing=missing, lost=lost)
    if missing and any(d != 0 for d, f in zip(documented, fed) if not f) or lost:
        return Judgement(DROPPED, **found)
    ratios = ratios[np.array(counted)]
    if _alike(ratios, close):
        factor = float(np.mean(ratios))
        if abs(factor - 1) <= close:
            return Judgement(None, **found)
        return Judgement(SCALED, factor=factor, **found)
    twice = [abs(r - 2) <= 2 * close for r in ratios]
    once = [abs(r - 1) <= close for r in ratios]
    if any(twice) and all(t or o for t, o in zip(twice, once)):
        counted_atoms = [a for a, c in zip(atoms, counted) if c]
        found["doubled"] = tuple(a for a, t in zip(counted_atoms, twice) if t)
        return Judgement(TWICE, **found)
    if _alike(weights, close) and not _alike(found["documented"], close):
        return Judgement(EQUAL, **found)
    return Judgement(OTHER, **found)


def _alike(values, tolerance):
    values = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(values)):
        return False
    middle = float(np.median(np.abs(values)))
    return middle > 0 and float(np.max(np.abs(values - values[0]))) <= tolerance * middle
