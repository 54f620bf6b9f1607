"""TRANSFORM_SHIFT: train and test inputs that differ per channel after their transforms.

Both splits come from one distribution, so after their transforms each channel (image inputs
``(C, ...)``: per channel; rows of features: per feature; sequences ``(T, F)``: per feature)
must have the same location and spread in both. Normalisation applied to one split only,
other constants on each side, a ``/ 255`` on one side or channels swapped break that.

Statistics, robust to odd examples and to odd positions within an example: a channel's location
is the median over examples of each example's channel median (of the feature's value for
rows), its spread the median of each example's channel interquartile range / 1.349 (for rows,
the interquartile range over examples); padding, erasing and cut-out change a minority of an
example's positions and move neither much. A difference counts only
when it is far outside the sampling noise, measured by drawing ``DRAWS`` random parts of the
training set the size of the test split (at most half of it) and comparing each with the rest
(rescaled to n train and m test examples), and large in itself: the location moved by more than
``LOCATION_LIMIT`` spreads, or the spread changed by more than ``SCALE_LIMIT`` times. Train-only
augmentation (crops with padding, flips, colour jitter of a few tenths) moves these far less.
Parts the size of the test split, not halves, because a quantile of a discrete feature (pixel
levels, counts) jumps between levels far more often in a small sample than the square-root
law predicts from large ones. A spread below ``FLAT`` of the other split's is no spread (a
constant column standardised carries rounding, not spread).
"""
import itertools

import numpy as np

from ...findings import Finding

DRAWS = 24
Z_LIMIT = 6.0           # differences this many noise SDs away count
LOCATION_LIMIT = 0.5    # a location moved by this many spreads
SCALE_LIMIT = 1.5       # a spread this many times larger or smaller
EXAMPLES = 5
ZERO_SPREAD_LOG_CHANCE = np.log(1e-9)   # about as rare as Z_LIMIT noise SDs
FLAT = 1e-9             # a spread this small against the other split's is none
CHANNELS = 16           # a 2-D example with a side this short is (channels, time) or (time,
                        # features); otherwise an image of one channel


def channel_statistics(x):
    """``(per-example locations (n, C), per-example spreads (n, C) or None, word)``."""
    n = len(x)
    if x.ndim == 1:
        return x.reshape(n, 1).astype(np.float64), None, "feature"
    if x.ndim == 2:
        return x.astype(np.float64), None, "feature"
    if x.ndim == 3 and x.shape[1] > x.shape[2] and x.shape[2] <= CHANNELS:   # (T, F)
        return (*_robust(np.swapaxes(x, 1, 2)), "feature")
    if x.ndim == 3 and x.shape[1] < x.shape[2] and x.shape[1] <= CHANNELS:   # (C, T)
        return (*_robust(x), "channel")
    if x.ndim == 3:                                    # (H, W) images: one channel
        return (*_robust(x.reshape(n, 1, -1)), "channel")
    return (*_robust(x.reshape(n, x.shape[1], -1)), "channel")


def _robust(values):
    """Each example's median and interquartile range / 1.349 per channel (``values``:
    ``(n, C, positions)``), robust to the minority of positions that padding, erasing or
    cut-out changes; a channel whose typical example has no spread there (sparse images:
    mostly background) falls back to each example's mean and std."""
    values = values.astype(np.float64)
    q25, q50, q75 = np.percentile(values, [25, 50, 75], axis=2)
    spread = (q75 - q25) / 1.349
    flat = np.median(spread, axis=0) == 0
    if flat.any():
        q50[:, flat] = values[:, flat].mean(axis=2)
        spread[:, flat] = values[:, flat].std(axis=2)
    return q50, spread


def _summary(locations, spreads):
    if spreads is None:
        q25, location, q75 = _tied_quantiles(locations, (0.25, 0.5, 0.75))
        spread = (q75 - q25) / 1.349
        with np.errstate(invalid="ignore"):
            fallback = locations.std(axis=0)
        spread = np.where(spread > 0, spread, fallback)
    else:
        location, = _tied_quantiles(locations, (0.5,))
        spread, = _tied_quantiles(spreads, (0.5,))
    return location, spread


def _tied_quantiles(values, probabilities):
    """Quantiles per column of ``values`` ``(n, C)`` that move smoothly with the share of tied
    values: each distinct value sits at the middle of its run in the sorted column and a
    quantile interpolates between those points (the mid-distribution quantile). Without ties
    this is the usual interpolated quantile; with them (pixel levels, counts, a feature that
    is mostly zero) the usual one jumps a whole level when a share moves by one example."""
    ordered = np.sort(values, axis=0)
    n, columns = ordered.shape
    index = np.arange(n)[:, None]
    starts = np.ones(ordered.shape, bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    first = np.maximum.accumulate(np.where(starts, index, 0), axis=0)
    ends = np.ones(ordered.shape, bool)
    ends[:-1] = starts[1:]
    last = np.minimum.accumulate(np.where(ends, index, n - 1)[::-1], axis=0)[::-1]
    middle = (first + last + 1) / 2.0            # in examples, 0.5 for the first of n distinct
    cols = np.arange(columns)
    out = []
    for probability in probabilities:
        position = probability * n
        above = np.clip((middle <= position).sum(axis=0), 1, n - 1)  # first point past it
        x0, x1 = middle[above - 1, cols], middle[above, cols]
        y0, y1 = ordered[above - 1, cols], ordered[above, cols]
        with np.errstate(divide="ignore", invalid="ignore"):
            weight = np.clip(np.where(x1 > x0, (position - x0) / (x1 - x0), 1.0), 0.0, 1.0)
        out.append(y0 + weight * (y1 - y0))
    return out


def shift_findings(train_x, test_x, *, seed=0, transformed=True):
    """TRANSFORM_SHIFT findings for train and test inputs (arrays, one example per row).

    ``transformed``: the inputs were read through a pipeline's transforms (else they are the
    arrays the user passed, and the message says so)."""
    if train_x is None or test_x is None or len(train_x) < 16 or len(test_x) < 8:
        return []
    if train_x.shape[1:] != test_x.shape[1:] or train_x.dtype.kind not in "biuf":
        return []
    train_loc, train_spread, word = channel_statistics(train_x)
    test_loc, test_spread, _ = channel_statistics(test_x)
    loc_a, spread_a = _summary(train_loc, train_spread)
    loc_b, spread_b = _summary(test_loc, test_spread)
    unit = np.maximum(spread_a, spread_b)
    spread_a, spread_b = (np.where(s < FLAT * unit, 0.0, s) for s in (spread_a, spread_b))
    usable = (unit > 0) & np.isfinite(unit) & np.isfinite(loc_a) & np.isfinite(loc_b)
    if not usable.any():
        return []
    n, m = len(train_x), len(test_x)
    part = min(m, n // 2)
    null_loc, null_scale = _part_noise(train_loc, train_spread, part, seed)
    rescale = np.sqrt((1 / m + 1 / n) / (1 / part + 1 / (n - part)))
    moved = np.abs(loc_b - loc_a)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.exp(np.abs(np.log(spread_b / spread_a)))
        z_loc = moved / np.maximum(null_loc * rescale, 1e-12 * unit)
        z_scale = np.abs(np.log(spread_b / spread_a)) / np.maximum(null_scale * rescale, 1e-12)
    positive = (spread_a > 0) & (spread_b > 0)
    by_location = usable & (z_loc > Z_LIMIT) & (moved > LOCATION_LIMIT * unit)
    by_scale = usable & positive & (z_scale > Z_LIMIT) & (ratio > SCALE_LIMIT)
    one_sided_zero = usable & ((spread_a == 0) != (spread_b == 0)) & _zero_spread_unlikely(
        train_loc, test_loc, spread_a == 0, FLAT * unit)
    off = np.flatnonzero(by_location | by_scale | one_sided_zero)
    if not len(off):
        return []
    worst = off[np.argsort(-(moved[off] / unit[off]) - np.log(np.where(
        np.isfinite(ratio[off]), ratio[off], 1e6)))]
    with np.errstate(divide="ignore", invalid="ignore"):
        moved_in_spreads = np.where(unit > 0, moved / unit, 0.0)
    parts = [f"{word} {c}: train location {loc_a[c]:.3g} spread {spread_a[c]:.3g}, test "
             f"location {loc_b[c]:.3g} spread {spread_b[c]:.3g}" for c in worst[:3]]
    hint = _hint(loc_a, spread_a, loc_b, spread_b, worst, word)
    return [Finding(
        "TRANSFORM_SHIFT", "warning", "data",
        f"{'after their transforms, ' if transformed else ''}train and test inputs differ in "
        f"{len(off)} of {len(loc_a)} "
        f"{word}s, far beyond the noise between random parts of the training set "
        f"({'; '.join(parts)}{'; ...' if len(off) > 3 else ''}){hint}",
        "apply the same transforms, with the same constants (the training set's mean and "
        "std, the same scaling and channel order), to every split",
        {"channels": len(off), "of": len(loc_a), "word": word, "example_channels": worst[:EXAMPLES],
         "train_location": loc_a[worst[:EXAMPLES]], "test_location": loc_b[worst[:EXAMPLES]],
         "train_spread": spread_a[worst[:EXAMPLES]], "test_spread": spread_b[worst[:EXAMPLES]],
         "spread_ratio": np.where(np.isfinite(ratio), ratio, 0.0)[worst[:EXAMPLES]],
         "location_moved_in_spreads": moved_in_spreads[worst[:EXAMPLES]]})]


def _zero_spread_unlikely(train_loc, test_loc, train_flat, tolerance):
    """Per channel: a split with no spread is far outside the sampling noise, judged by the
    chance that that many examples drawn from the other split all sit at its one value (a
    rarely non-zero feature has no spread in a small random split, by chance alone); values
    within ``tolerance`` of it are at it."""
    unlikely = np.zeros(train_loc.shape[1], bool)
    for c in range(train_loc.shape[1]):
        flat, other = (train_loc, test_loc) if train_flat[c] else (test_loc, train_loc)
        value = np.median(flat[:, c])
        others = other[:, c]
        off = float(np.mean(np.abs(others - value) > tolerance[c]))
        with np.errstate(divide="ignore"):
            log_chance = len(flat) * np.log1p(-off) if off < 1 else -np.inf
        unlikely[c] = log_chance < ZERO_SPREAD_LOG_CHANCE
    return unlikely


def _part_noise(locations, spreads, part, seed):
    """SDs of the location difference and of the log spread ratio between a random ``part``
    of the examples and the rest."""
    rng = np.random.default_rng(seed)
    n = len(locations)
    diffs, logs = [], []
    for _ in range(DRAWS):
        order = rng.permutation(n)
        a, b = order[:part], order[part:]
        la, sa = _summary(locations[a], None if spreads is None else spreads[a])
        lb, sb = _summary(locations[b], None if spreads is None else spreads[b])
        diffs.append(lb - la)
        with np.errstate(divide="ignore", invalid="ignore"):
            logs.append(np.where((sa > 0) & (sb > 0), np.log(sb / sa), 0.0))
    return np.std(diffs, axis=0), np.std(logs, axis=0)


def _hint(loc_a, spread_a, loc_b, spread_b, worst, word):
    """A guess at the mistake: swapped channels, a factor of 255, one side standardised."""
    channels = len(loc_a)
    if word == "channel" and 2 <= channels <= 4:
        unit = np.maximum(spread_a, spread_b)
        best = min(itertools.permutations(range(channels)),
                   key=lambda p: float(np.sum(np.abs(loc_b - loc_a[list(p)]) / unit)))
        cost = np.abs(loc_b - loc_a[list(best)]) / unit
        if list(best) != list(range(channels)) and np.all(cost < LOCATION_LIMIT / 2):
            pairs = ", ".join(f"test {word} {i} looks like train {word} {j}"
                              for i, j in enumerate(best) if i != j)
            return f"; the channels look swapped ({pairs})"
    c = worst[0]
    if spread_a[c] > 0 and spread_b[c] > 0:
        ratio = spread_a[c] / spread_b[c]
        for factor in (255.0, 1 / 255.0):
            if abs(np.log(ratio / factor)) < np.log(1.3):
                side = "test" if factor > 1 else "train"
                return f"; the {side} values are about 255 times smaller (a / 255 on one side)"
    shown = f"{word}{'s' if len(worst) > 1 else ''} " + ", ".join(
        str(int(c)) for c in worst[:EXAMPLES]) + (", ..." if len(worst) > EXAMPLES else "")
    standard = [(np.abs(loc) < 0.25) & (np.abs(spread - 1) < 0.35)
                for loc, spread in ((loc_a, spread_a), (loc_b, spread_b))]
    names = ("train", "test")
    for side, other in ((0, 1), (1, 0)):
        # one split standardised in every channel, the other in none of those that differ
        if standard[side].all() and not standard[other][worst].any():
            return (f"; only the {names[side]} split looks standardised (location ~0, spread "
                    f"~1 in every {word}): the {names[other]} split looks unnormalised in "
                    f"{shown}")
    unit = np.maximum(spread_a, spread_b)[worst]
    moved = np.any(np.abs(loc_b - loc_a)[worst] > LOCATION_LIMIT * unit)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.any(np.abs(np.log(spread_b[worst] / spread_a[worst])) > np.log(SCALE_LIMIT))
    what = {(True, True): "shifted and scaled differently", (True, False): "shifted",
            (False, True): "scaled differently"}.get((bool(moved), bool(scaled)), "different")
    return f"; the test split looks {what} in {shown}"
