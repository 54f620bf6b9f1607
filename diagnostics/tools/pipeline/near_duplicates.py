"""DATA_LEAKAGE (near-duplicates): test examples that are slightly changed copies of training
examples (augmented copies made before the split, re-encoded or re-cropped files).

The scale of "distinct examples" is the training set's own: for each training example read,
the distance to its ``REFERENCE_K``-th nearest other training example (the k-th, not the first:
a training set that holds a few copies of each source, augmented on purpose, still has its
distinct neighbours there); its median is the reference. A test example is a near-duplicate
when a training example lies within ``NEAR_SHARE`` of that reference (and is not an exact
copy, reported by the exact search). Natural close pairs of distinct examples exist, so the
finding needs at least ``LEAK_SHARE`` of the test examples read (and 3) to be near-duplicates;
copies of sources split on both sides make most of them so. Examples with fewer than
``MIN_VALUES`` values are not judged (distinct rows of a few features can be close by nature).

How many distinct examples lie that close by chance depends on the data's intrinsic dimension
d, not on its number of values: about ``REFERENCE_K * NEAR_SHARE ** d`` of them per example
(densely sampled tables of a few underlying factors have many). d is estimated from the
training set (the doubling of the neighbour count: ``log 2 / log(r_2k / r_k)`` at the
``REFERENCE_K``-th and twice that neighbour, beyond a source's own augmented copies), and the
share of test examples judged near must exceed three times the share expected by chance.

Overlapping windows of one series (a sliding-window dataset split by window) are not close in
distance (one is the other shifted), so sequences are also matched by their runs: a test
example sharing a run of half its length, value for value and in order, with a training
example is a near-duplicate (runs with fewer than half distinct values, padding, are not
used).
"""
import numpy as np

from ...findings import Finding

REFERENCE_K = 10
NEAR_SHARE = 0.25
LEAK_SHARE = 0.1
MIN_VALUES = 6          # distinct examples within 0.25 of the 10th-neighbour distance: about
                        # 10 * 0.25**d of them in d dimensions, 0.2% at d = 6
CHANCE_FACTOR = 3.0     # near-duplicates needed, as a multiple of those expected by chance
PROJECTED = 64
RUN_MIN = 8             # sequences of at least 16 steps are matched by runs of half of them
MAX_RUNS = 4_000_000    # runs hashed at most
EXAMPLES = 5


def near_duplicate_findings(train_x, test_x, *, exact_test_rows=()):
    if train_x is None or test_x is None or train_x.shape[1:] != test_x.shape[1:]:
        return []
    if train_x.dtype.kind not in "biuf":
        return []
    return _by_distance(train_x, test_x, exact_test_rows) or _by_runs(train_x, test_x,
                                                                       exact_test_rows)


def _by_distance(train_x, test_x, exact_test_rows):
    train = train_x.reshape(len(train_x), -1).astype(np.float64)
    test = test_x.reshape(len(test_x), -1).astype(np.float64)
    if train.shape[1] < MIN_VALUES or len(train) <= REFERENCE_K + 1 or len(test) < 3:
        return []
    if not (np.isfinite(train).all() and np.isfinite(test).all()):
        return []
    reference, dimension = distinct_scale_and_dimension(train)
    if reference <= 0:
        return []
    nearest, distance = nearest_rows(train, test)
    exact = set(int(r) for r in exact_test_rows)
    near = np.array([j for j in np.flatnonzero((distance < NEAR_SHARE * reference)
                                                & (distance > 0)) if j not in exact], dtype=int)
    share = len(near) / len(test)
    by_chance = 1.0 - np.exp(-REFERENCE_K * NEAR_SHARE ** dimension)
    if len(near) < 3 or share < max(LEAK_SHARE, CHANCE_FACTOR * by_chance):
        return []
    order = near[np.argsort(distance[near])]
    shown = ", ".join(f"test {int(j)} ~ train {int(nearest[j])}" for j in order[:3])
    return [Finding(
        "DATA_LEAKAGE", "warning", "data",
        f"{len(near)} of {len(test)} test examples read ({share:.0%}) are near-duplicates of "
        f"training examples: each lies within {NEAR_SHARE:g} of the distance that separates "
        f"distinct training examples (median distance to the {REFERENCE_K}th nearest training "
        f"example {reference:.3g}; theirs {np.median(distance[near]):.3g}), e.g. {shown}",
        "split by source before augmenting or copying: every copy of one original example "
        "(augmented, re-encoded, re-cropped) in the same split",
        {"near_duplicates": len(near), "fraction": share, "reference_distance": reference,
         "median_near_distance": float(np.median(distance[near])),
         "example_test_rows": order[:EXAMPLES], "example_train_rows": nearest[order[:EXAMPLES]],
         "kind": "near-duplicate"})]


def _sequences(x):
    """``(n, T, F)`` time-major view of sequence examples, or None for other examples."""
    if x.ndim == 2 and x.shape[1] >= 2 * RUN_MIN:
        return x[:, :, None]
    if x.ndim == 3 and x.shape[2] <= 16 and x.shape[1] >= 2 * RUN_MIN:
        return x
    if x.ndim == 3 and x.shape[1] <= 16 and x.shape[2] >= 2 * RUN_MIN:
        return np.swapaxes(x, 1, 2)
    return None


def _run_hashes(sequences, length, starts=None):
    """A 64-bit hash of each run of ``length`` time steps (``starts``: all when None)."""
    bits = np.ascontiguousarray(sequences.astype(np.float64)).view(np.uint64)
    n, steps, features = bits.shape
    weights = np.random.default_rng(1).integers(1, 2**63, size=(length, features),
                                                dtype=np.uint64) | np.uint64(1)
    if starts is None:
        starts = range(steps - length + 1)
    out = np.empty((n, len(starts)), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column, start in enumerate(starts):
            window = bits[:, start:start + length, :]
            out[:, column] = np.sum(window * weights[None], axis=(1, 2), dtype=np.uint64)
    return out


def _by_runs(train_x, test_x, exact_test_rows):
    """Test sequences that share a run of half their length with a training sequence."""
    train, test = _sequences(train_x), _sequences(test_x)
    if train is None or test is None or len(test) < 3:
        return []
    steps = train.shape[1]
    length = steps // 2
    if len(train) * (steps - length + 1) > MAX_RUNS:
        return []
    known = {}
    hashes = _run_hashes(train, length)
    for row, column in zip(*np.nonzero(np.ones_like(hashes, dtype=bool))):
        known.setdefault(int(hashes[row, column]), int(row))
    ends = [0, steps - length]
    probes = _run_hashes(test, length, ends)
    exact = set(int(r) for r in exact_test_rows)
    matches = {}
    for j in range(len(test)):
        if j in exact:
            continue
        for column, start in enumerate(ends):
            run = test[j, start:start + length].reshape(length, -1)
            if len(np.unique(run, axis=0)) < length // 2:
                continue      # padding or a constant stretch: equal by nature
            hit = known.get(int(probes[j, column]))
            if hit is not None and np.array_equal(
                    _find_run(train[hit], run), run):
                matches[j] = hit
                break
    share = len(matches) / len(test)
    if len(matches) < 3 or share < LEAK_SHARE:
        return []
    shown = ", ".join(f"test {j} ~ train {i}" for j, i in list(matches.items())[:3])
    rows = np.array(list(matches))
    return [Finding(
        "DATA_LEAKAGE", "warning", "data",
        f"{len(matches)} of {len(test)} test examples read ({share:.0%}) are near-duplicates "
        f"of training examples: each shares a run of {length} of its {steps} steps, value for "
        f"value, with a training example (overlapping windows of one series on both sides of "
        f"the split), e.g. {shown}",
        "split the series (or recordings, users, sources) first, then cut each side into "
        "windows",
        {"near_duplicates": len(matches), "fraction": share, "run_length": length,
         "example_test_rows": rows[:EXAMPLES],
         "example_train_rows": np.array([matches[j] for j in rows[:EXAMPLES]]),
         "kind": "overlapping windows"})]


def _find_run(sequence, run):
    """The stretch of ``sequence`` equal to ``run`` (or an empty array)."""
    length = len(run)
    flat = sequence.reshape(len(sequence), -1)
    for start in range(len(flat) - length + 1):
        if np.array_equal(flat[start:start + length], run):
            return flat[start:start + length]
    return flat[:0]


def distinct_scale(rows):
    """The median distance from each row to its ``REFERENCE_K``-th nearest other row."""
    return distinct_scale_and_dimension(rows)[0]


def distinct_scale_and_dimension(rows):
    """``(median distance to the REFERENCE_K-th nearest other row, intrinsic dimension)``;
    the dimension from the median ratio of the 2k-th to the k-th neighbour's distance
    (inf when too few rows to tell, or the ratio is 1)."""
    projected = rows @ _projection(rows.shape[1])
    far = min(2 * REFERENCE_K, len(rows) - 1)
    kth, second = _kth_distances(projected, (REFERENCE_K, far))
    reference = float(np.median(kth))
    if far <= REFERENCE_K:
        return reference, float("inf")
    usable = (kth > 0) & (second > kth)
    if not usable.any():
        return reference, float("inf")
    ratio = float(np.median(second[usable] / kth[usable]))
    return reference, float(np.log(far / REFERENCE_K) / np.log(ratio)) if ratio > 1 else \
        float("inf")


def nearest_rows(rows, queries=None):
    """``(index, exact distance)`` of each query's nearest row (found in a projection to at
    most ``PROJECTED`` dimensions); without ``queries``, each row's nearest other row."""
    projection = _projection(rows.shape[1])
    same = queries is None
    queries = rows if same else queries
    best = _nearest(rows @ projection, queries @ projection, exclude_self=same)
    return best, np.sqrt(np.sum((queries - rows[best]) ** 2, axis=1))


def _projection(dims):
    if dims <= PROJECTED:
        return np.eye(dims)
    return np.random.default_rng(0).standard_normal((dims, PROJECTED)) / np.sqrt(PROJECTED)


def _squared(a, b):
    return np.maximum(np.sum(a ** 2, axis=1)[:, None] + np.sum(b ** 2, axis=1)[None, :]
                      - 2.0 * a @ b.T, 0.0)


def _kth_distances(rows, ks, block=1024):
    """Each row's distance to its k-th nearest other row, for each k in ``ks``."""
    ks = tuple(ks)
    out = np.empty((len(ks), len(rows)))
    for start in range(0, len(rows), block):
        d2 = _squared(rows[start:start + block], rows)
        d2[np.arange(len(d2)), np.arange(start, start + len(d2))] = np.inf
        parted = np.partition(d2, [k - 1 for k in ks], axis=1)
        for i, k in enumerate(ks):
            out[i, start:start + block] = np.sqrt(parted[:, k - 1])
    return out


def _nearest(rows, queries, *, exclude_self=False, block=1024):
    best = np.empty(len(queries), dtype=np.int64)
    for start in range(0, len(queries), block):
        d2 = _squared(queries[start:start + block], rows)
        if exclude_self:
            d2[np.arange(len(d2)), np.arange(start, start + len(d2))] = np.inf
        best[start:start + block] = np.argmin(d2, axis=1)
    return best
