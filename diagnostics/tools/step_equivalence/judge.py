"""What a step's loss is, read at the model's outputs: pure functions on arrays.

A step's backward passes send a gradient into each output the model returned; the objective,
``loss_fn`` on the whole batch, has its own gradient at those same outputs (the rows of every
call put together, each row once). Row by row, the step's gradient is ``s`` times the
objective's when the step scores that row as the objective does up to a weight; ``R``, the
sum of ``s`` over the calls that fed the row, is 1 for every row in a correct step. The
pattern is read from ``R``: rows never fed or weighted 0 (dropped), rows weighted 2 (twice),
one factor everywhere (scaled by c), and per call, parts whose mean losses are weighted alike
where their shares of the objective differ (weighted equally). Judging at the outputs makes it
exact whatever the model does with its batch (batch norm over micro-batches, dropout).
"""
from dataclasses import dataclass

import numpy as np

SCALED, EQUAL, DROPPED, TWICE, OTHER = ("scaled", "weighted equally", "dropped", "twice",
                                        "other")


@dataclass(frozen=True)
class Part:
    """Rows of the batch the step fed the model together, ``times`` times."""

    rows: tuple[int, ...]
    times: int = 1

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
    DROPPED, TWICE, OTHER. ``difference``: relative difference from the objective's gradient.
    ``factor``: the scale for SCALED. ``weights``/``documented``: per part (``parts``), the
    step's weight on each part's mean loss and the objective's. ``missing``: batch rows the step
    never fed the model; ``lost``/``doubled``: rows it fed whose loss weighs 0 / twice."""

    pattern: str | None
    difference: float
    factor: float | None = None
    parts: tuple[Part, ...] = ()
    weights: tuple[float, ...] = ()
    documented: tuple[float, ...] = ()
    missing: tuple[int, ...] = ()
    lost: tuple[Part, ...] = ()
    doubled: tuple[Part, ...] = ()
    at_outputs: bool = False      # judged at the model's outputs, not its parameters


@dataclass(frozen=True)
class CallGradients:
    """One call of the model, seen at its outputs (one row per fed batch row, the output
    entries flattened): ``step``, the gradient the step sent there; ``objective``, the whole
    batch's loss gradient at those outputs; ``own``: its part's mean loss gradient there."""

    rows: tuple[int, ...]
    step: np.ndarray
    objective: np.ndarray
    own: np.ndarray | None


def relative(a, b):
    """||a - b|| / ||b|| (0 for two zero arrays, inf against a zero ``b``)."""
    scale = float(np.linalg.norm(b))
    gap = float(np.linalg.norm(a - b))
    return gap / scale if scale > 0 else (0.0 if gap == 0 else float("inf"))


def scale_of(gradient, reference, tolerance):
    """The factor c with ``gradient = c * reference`` (within ``tolerance``), else None."""
    norm = float(np.vdot(reference, reference))
    if norm == 0:
        return None
    factor = float(np.vdot(gradient, reference)) / norm
    return factor if relative(gradient, factor * reference) <= tolerance else None


def by_scale(gradient, reference, tolerance):
    """A Judgement from a gradient and the objective's alone (the parts unknown)."""
    difference = relative(gradient, reference)
    if difference <= tolerance:
        return Judgement(None, difference)
    factor = scale_of(gradient, reference, tolerance)
    if factor is not None and factor > 0:
        return Judgement(SCALED, difference, factor=factor)
    return Judgement(OTHER, difference)


def at_outputs(calls, missing, size, tolerance):
    """A Judgement from the calls' ``CallGradients``; ``missing``: the objective's gradient
    at the outputs of the rows no call fed (``{row: vector}``); ``size``: the batch's rows."""
    close = 10 * tolerance
    largest = max([float(np.max(np.linalg.norm(c.objective, axis=1), initial=0)) for c in calls]
                  + [float(np.linalg.norm(v)) for v in missing.values()] + [0.0])
    if largest == 0:
        return None
    ratios, total = [], np.zeros(size)
    scored = np.zeros(size, dtype=bool)
    for call in calls:
        ratio, fits = _row_ratios(call.step, call.objective, largest, close)
        if not fits:
            return _other(calls, missing)
        ratios.append(ratio)
        for row, value, target in zip(call.rows, ratio, call.objective):
            total[row] += value
            scored[row] |= bool(np.linalg.norm(target) > close * largest)
    parts = _parts(calls)
    found = dict(difference=_difference(calls, missing), parts=parts, at_outputs=True)
    never = tuple(row for row, vector in sorted(missing.items())
                  if np.linalg.norm(vector) > close * largest)
    fed = np.zeros(size, dtype=bool)
    for call in calls:
        fed[list(call.rows)] = True
    judged = scored & fed
    values = total[judged]
    if never or not values.size:
        return Judgement(DROPPED, missing=never, **found)
    scale = float(np.max(np.abs(values)))
    lost_rows = [row for row in np.flatnonzero(judged) if abs(total[row]) <= close * scale]
    if lost_rows:
        return Judgement(DROPPED, lost=_runs(lost_rows), **found)
    if _alike(values, close):
        factor = float(np.mean(values))
        if abs(factor - 1) <= close:
            return Judgement(None, **found)
        return Judgement(SCALED, factor=factor, **found)
    twice, once = np.abs(values - 2) <= 2 * close, np.abs(values - 1) <= close
    if twice.any() and np.all(twice | once):
        doubled = [row for row in np.flatnonzero(judged) if abs(total[row] - 2) <= 2 * close]
        return Judgement(TWICE, doubled=_runs(doubled), **found)
    weighted = _part_weights(calls, ratios, largest, close)
    if weighted is not None:
        weights, documented = weighted
        found.update(weights=tuple(weights), documented=tuple(documented))
        if len(weights) > 1 and _alike(weights, close) and not _alike(documented, close):
            return Judgement(EQUAL, **found)
    return Judgement(OTHER, **found)


def _row_ratios(step, objective, largest, close):
    """Per row, s with ``step = s * objective`` and whether every row fits such an s (a row
    the objective does not score must get no gradient from the step either)."""
    norms = np.einsum("ij,ij->i", objective, objective)
    dots = np.einsum("ij,ij->i", step, objective)
    ratio = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    gap = np.linalg.norm(step - ratio[:, None] * objective, axis=1)
    room = close * np.maximum(np.linalg.norm(step, axis=1), np.abs(ratio) * np.sqrt(norms))
    return ratio, bool(np.all(gap <= room + close * largest))


def _part_weights(calls, ratios, largest, close):
    """Per distinct part, the step's weight on its mean loss and the objective's, when each
    call weighs all its rows alike; None otherwise."""
    weights, documented, seen = [], [], set()
    for call, ratio in zip(calls, ratios):
        if call.own is None or call.rows in seen:
            continue
        seen.add(call.rows)
        rows = np.linalg.norm(call.objective, axis=1) > close * largest
        if not rows.any() or not _alike(ratio[rows], close):
            return None
        share = scale_of(call.objective, call.own, close)
        if share is None:
            return None
        weights.append(float(np.mean(ratio[rows])) * share)
        documented.append(share)
    return (weights, documented) if weights else None


def _difference(calls, missing):
    step = np.concatenate([c.step.reshape(-1) for c in calls]
                          + [np.zeros(v.size) for v in missing.values()])
    objective = [c.objective if c.rows not in {d.rows for d in calls[:i]} else 0 * c.objective
                 for i, c in enumerate(calls)]
    objective = np.concatenate([o.reshape(-1) for o in objective]
                               + [v.reshape(-1) for v in missing.values()])
    return relative(step, objective)


def _other(calls, missing):
    return Judgement(OTHER, _difference(calls, missing), parts=_parts(calls), at_outputs=True)


def _parts(calls):
    parts, times = [], {}
    for call in calls:
        if call.rows not in times:
            parts.append(call.rows)
        times[call.rows] = times.get(call.rows, 0) + 1
    return tuple(Part(rows, times[rows]) for rows in parts)


def _runs(rows):
    """Sorted rows as Parts of consecutive runs."""
    runs, start = [], None
    for row in sorted(rows):
        if start is None or row != runs[-1][-1] + 1:
            runs.append([row])
            start = row
        else:
            runs[-1].append(row)
    return tuple(Part(tuple(run)) for run in runs)


def _alike(values, tolerance):
    values = np.asarray(values, dtype=float)
    if not values.size or not np.all(np.isfinite(values)):
        return False
    middle = float(np.median(np.abs(values)))
    return middle > 0 and float(np.max(np.abs(values - values[0]))) <= tolerance * middle
