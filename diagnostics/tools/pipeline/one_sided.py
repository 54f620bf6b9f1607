"""TRANSFORM_ONE_SIDED: a random geometric transform applied to the input but not the target.

When the target is aligned with the input position by position (a segmentation mask, a
depth or heat map, per-step labels of a sequence), a random flip, crop, shift or rotation must
move both together. Reading one index twice gives two draws of the pipeline; for each pair of
draws that differ, the candidate transforms of the aligned axes (the flips and 90-degree turns
of an image, a sequence's reversal, times every shift that keeps at least half of the
positions) are tried on draw 1, and each is kept for the input, and for the target, when it
maps draw 1 onto draw 2 on the positions both cover (inputs: correlation >= ``FIT_CORR``,
which colour jitter and noise keep; class targets and token inputs: at least ``FIT_EQUAL`` of
the positions equal). A healthy joint transform leaves at least one candidate that fits both;
an input moved while its target stayed (or moved otherwise) leaves none. Pairs where the input
fits no candidate (a resized crop, an elastic warp) or the target is constant say nothing.
"""
import itertools

import numpy as np

from ...findings import Finding

FIT_CORR = 0.95
FIT_EQUAL = 0.97
MIN_OVERLAP = 0.5
MAX_SHIFT_2D = 6
MAX_SHIFT_1D = 32
MAX_SIDE = 64           # larger images are judged on their central window of this side
MIN_INFORMATIVE = 2     # pairs of differing draws needed, of which a share must disagree
ONE_SIDED_SHARE = 0.2
MAX_JUDGED = 16         # pairs judged at most (each tries ~1,350 candidate transforms)


def one_sided_findings(split):
    repeats = [r for r in split.repeats if all(a is not None for a in r[1:])
               and _aligned(r[1], r[2]) is not None]
    informative, disagreeing, example = 0, 0, None
    for index, x1, y1, x2, y2 in repeats:
        if informative >= MAX_JUDGED:
            break
        if x1.shape != x2.shape or y1.shape != y2.shape:
            continue
        if np.array_equal(x1, x2) and np.array_equal(y1, y2):
            continue        # no randomness drawn for this index
        kind = _aligned(x1, y1)
        a1, a2 = _layout(x1, kind), _layout(x2, kind)
        b1, b2 = _layout(y1, kind), _layout(y2, kind)
        if np.all(b1 == b1.flat[0]) and np.all(b2 == b2.flat[0]):
            continue        # a constant target fits any transform
        outcome = _judge(a1, a2, b1, b2, kind)
        if outcome is None:
            continue
        informative += 1
        if outcome is not True:
            disagreeing += 1
            example = example or (index, outcome)
    if informative < MIN_INFORMATIVE or disagreeing < 2 or (
            disagreeing < ONE_SIDED_SHARE * informative):
        return []
    index, (input_move, target_move) = example
    return [Finding(
        "TRANSFORM_ONE_SIDED", "warning", "data",
        f"{split.name}: in {disagreeing} of {informative} pairs of reads of one index, the "
        f"input and its aligned target change inconsistently (e.g. index {index}: the input "
        f"{input_move}, the target {target_move}); a random flip, crop or shift is applied "
        f"to one of them only",
        "draw the random transform once and apply it to the input and its target together "
        "(a joint transform, or the same parameters for both)",
        {"pairs_judged": informative, "pairs_inconsistent": disagreeing,
         "example_index": index, "input_move": input_move, "target_move": target_move})]


def _aligned(x, y):
    """"image" (trailing two axes shared), "sequence" (first axis shared) or None."""
    if x is None or y is None or y.ndim == 0:
        return None
    if (x.ndim >= 2 and y.ndim >= 2 and x.shape[-2:] == y.shape[-2:]
            and min(x.shape[-2:]) >= 4):
        return "image"
    if x.ndim <= 2 and y.ndim <= 2 and x.shape[0] == y.shape[0] >= 8 and (
            x.ndim == 1 or x.shape[0] > x.shape[1]):
        return "sequence"
    return None


def _layout(array, kind):
    """The aligned axes first, everything else flattened last; a large image's central
    window (flips, quarter turns and shifts of the image map it onto itself)."""
    if kind == "image":
        moved = np.moveaxis(array.reshape((-1,) + array.shape[-2:]), 0, -1)
        return moved[_central(moved.shape[0]), _central(moved.shape[1])]
    return array.reshape(array.shape[0], -1)


def _central(size):
    if size <= MAX_SIDE:
        return slice(None)
    side = MAX_SIDE if (size - MAX_SIDE) % 2 == 0 else MAX_SIDE - 1
    start = (size - side) // 2
    return slice(start, start + side)


def _candidates(kind, shape):
    if kind == "image":
        turns = [(k, flip) for k in range(4) for flip in (False, True)]
        limit = min(MAX_SHIFT_2D, max(1, min(shape[:2]) // 4))
        shifts = list(itertools.product(range(-limit, limit + 1), repeat=2))
    else:
        turns = [(0, False), (0, True)]
        limit = min(MAX_SHIFT_1D, max(1, shape[0] // 4))
        shifts = [(s,) for s in range(-limit, limit + 1)]
    return [(turn, shift) for turn in turns for shift in shifts]


def _apply_turn(array, turn, kind):
    k, flip = turn
    if kind == "image":
        out = np.rot90(array, k, axes=(0, 1))
        return out[:, ::-1] if flip else out
    return array[::-1] if flip else array


def _overlap(first, second, shift):
    """Slices of ``first`` and ``second`` where ``second[p] ~ first[p - shift]``."""
    a, b = [], []
    for size, d in zip(first.shape, shift):
        if d >= 0:
            a.append(slice(0, size - d))
            b.append(slice(d, size))
        else:
            a.append(slice(-d, size))
            b.append(slice(0, size + d))
    return first[tuple(a)], second[tuple(b)]


def _fits(first, second, turn, shift, kind, exact):
    turned = _apply_turn(first, turn, kind)
    if turned.shape != second.shape:
        return False
    a, b = _overlap(turned, second, shift)
    if a.size == 0 or a.shape[0] * (a.shape[1] if kind == "image" else 1) < MIN_OVERLAP * (
            second.shape[0] * (second.shape[1] if kind == "image" else 1)):
        return False
    if exact:
        return float(np.mean(a == b)) >= FIT_EQUAL
    a, b = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
    sa, sb = a.std(), b.std()
    if sa == 0 or sb == 0:
        return bool(np.allclose(a, b))
    return float(np.mean((a - a.mean()) * (b - b.mean())) / (sa * sb)) >= FIT_CORR


def _judge(a1, a2, b1, b2, kind):
    """True (a candidate fits both), None (the input or target fits none: say nothing), or
    ``(input move, target move)`` in words."""
    exact_a = a1.dtype.kind in "biu"
    exact_b = b1.dtype.kind in "biu" or np.array_equal(b1, np.round(b1))
    candidates = _candidates(kind, a1.shape)
    input_fits = [c for c in candidates if _fits(a1, a2, *c, kind, exact_a)]
    if not input_fits:
        return _rearranged(a1, a2, b1, b2) if kind == "sequence" and exact_a else None
    if any(_fits(b1, b2, *c, kind, exact_b) for c in input_fits):
        return True
    target_fits = [c for c in candidates if _fits(b1, b2, *c, kind, exact_b)]
    if not target_fits:
        return None
    return _words(input_fits[0], kind), _words(target_fits[0], kind)


def _rearranged(a1, a2, b1, b2):
    """Positions permuted (a word-order shuffle): each draw's input and target hold the same
    values as the other's; a joint permutation keeps every (input, target) pair, two
    independent ones break them."""
    def multiset(rows):
        values, counts = np.unique(rows, axis=0, return_counts=True)
        return values.tobytes(), counts.tobytes()

    if multiset(a1) != multiset(a2) or multiset(b1) != multiset(b2):
        return None
    pairs1 = np.concatenate([a1, b1.astype(a1.dtype)], axis=1)
    pairs2 = np.concatenate([a2, b2.astype(a2.dtype)], axis=1)
    if multiset(pairs1) == multiset(pairs2):
        return True
    moved = "rearranged" if not np.array_equal(b1, b2) else "unchanged"
    return "rearranged (positions permuted)", (
        "rearranged by another permutation" if moved == "rearranged" else "unchanged")


def _words(candidate, kind):
    (k, flip), shift = candidate
    parts = []
    if k:
        parts.append(f"turned {90 * k} degrees")
    if flip:
        parts.append("flipped" if kind == "sequence" else "mirrored")
    if any(shift):
        amount = tuple(int(s) for s in shift) if len(shift) > 1 else int(shift[0])
        parts.append(f"shifted by {amount}")
    return " and ".join(parts) if parts else "unchanged"
