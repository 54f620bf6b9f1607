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
"""
import numpy as np

from ...findings import Finding

REFERENCE_K = 10
NEAR_SHARE = 0.25
LEAK_SHARE = 0.1
MIN_VALUES = 16
PROJECTED = 64
EXAMPLES = 5


def near_duplicate_findings(train_x, test_x, *, exact_test_rows=()):
    if train_x is None or test_x is None or train_x.shape[1:] != test_x.shape[1:]:
        return []
    train = train_x.reshape(len(train_x), -1).astype(np.float64)
    test = test_x.reshape(len(test_x), -1).astype(np.float64)
    if train.shape[1] < MIN_VALUES or len(train) <= REFERENCE_K + 1 or len(test) < 3:
        return []
    if not (np.isfinite(train).all() and np.isfinite(test).all()):
        return []
    projection = _projection(train.shape[1])
    ptrain, ptest = train @ projection, test @ projection
    reference = float(np.median(_kth_distances(ptrain, REFERENCE_K)))
    if reference <= 0:
        return []
    nearest = _nearest(ptrain, ptest)
    distance = np.sqrt(np.sum((test - train[nearest]) ** 2, axis=1))
    exact = set(int(r) for r in exact_test_rows)
    near = np.array([j for j in np.flatnonzero((distance < NEAR_SHARE * reference)
                                                & (distance > 0)) if j not in exact], dtype=int)
    share = len(near) / len(test)
    if len(near) < 3 or share < LEAK_SHARE:
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


def _projection(dims):
    if dims <= PROJECTED:
        return np.eye(dims)
    return np.random.default_rng(0).standard_normal((dims, PROJECTED)) / np.sqrt(PROJECTED)


def _squared(a, b):
    return np.maximum(np.sum(a ** 2, axis=1)[:, None] + np.sum(b ** 2, axis=1)[None, :]
                      - 2.0 * a @ b.T, 0.0)


def _kth_distances(rows, k, block=1024):
    out = np.empty(len(rows))
    for start in range(0, len(rows), block):
        d2 = _squared(rows[start:start + block], rows)
        d2[np.arange(len(d2)), np.arange(start, start + len(d2))] = np.inf
        out[start:start + block] = np.sqrt(np.partition(d2, k - 1, axis=1)[:, k - 1])
    return out


def _nearest(rows, queries, block=1024):
    best = np.empty(len(queries), dtype=np.int64)
    for start in range(0, len(queries), block):
        best[start:start + block] = np.argmin(_squared(queries[start:start + block], rows), axis=1)
    return best
