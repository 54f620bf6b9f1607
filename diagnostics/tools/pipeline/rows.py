"""PIPELINE_ROWS_MISSING: examples duplicated or never yielded in one pass over the data.

Three places lose rows, each judged by what it can show:

1. The sampler. The indices of one pass (``loader.batch_sampler``, read without loading data)
   of a sampler meant to cover the data set once (sequential, random without replacement, a
   sampler class of the user's) are counted exactly: indices yielded twice and indices never
   yielded. Samplers that draw with replacement or weights, one rank's share and the
   ``drop_last`` remainder of a shuffled pass (other rows each epoch) are by design.
2. ``__getitem__``. Distinct indices must yield distinct examples: an ``idx // 2``, a
   ``__len__`` longer than the data it wraps around, a list that repeats entries give the same
   example for several indices. Pairs of neighbouring and spread indices are compared; "the
   same" means equal within the dataset's own augmentation noise (the distance between two
   reads of one index), and far below the distance between distinct examples.
3. ``__len__`` against the storage it reads: a per-example array, tensor or list held by the
   dataset that is longer than ``len(dataset)`` (``len(self.x) - 1``, a hard-coded length, a
   file list filtered while its labels were not) loses its tail, unless the dataset indexes it
   through an index list of its own (a subset) or reads windows of it (a sequence data set).
"""
import numpy as np

from ...findings import Finding
from .near_duplicates import REFERENCE_K, distinct_scale, nearest_rows

EXAMPLES = 5
MIN_VALUES = 8          # examples with fewer values can be equal by nature (small tabular rows)
DUPLICATE_SHARE = 0.05  # of the indices compared, the share that must have a twin to judge
NOISE_FACTOR = 3.0      # "the same" = within this many times the median re-read distance
DISTINCT_SHARE = 0.2    # ... and under this share of the distance between distinct examples
                        # (the median distance to the REFERENCE_K-th nearest example)


def rows_findings(split, dataset, *, other_dataset=None):
    """PIPELINE_ROWS_MISSING findings of one split (``dataset``: the Dataset it read;
    ``other_dataset``: the other split's, which may read the storage's tail on purpose)."""
    findings = list(_reading_errors(split))
    if split.iterable:
        return findings + _iterable_rows(split)
    findings.extend(_sampler_rows(split))
    sizes = [size for _, size, _ in _columns(dataset)]
    findings.extend(_content_duplicates(split, max(sizes) if sizes else None))
    findings.extend(_length_vs_storage(dataset, split, other_dataset))
    return findings


def _fix():
    return ("make __len__ return the number of examples the dataset reads, index the storage "
            "with idx itself (not idx // 2 or a list filtered apart from its labels), and give "
            "the DataLoader a sampler that yields every index once per epoch "
            "(shuffle=True or a SequentialSampler)")


def _message(split, distinct, what, source=None):
    return (f"{split.name}: one pass yields {distinct} distinct of the source's "
            f"{split.length if source is None else source} examples ({what})")


def _reading_errors(split):
    if not split.errors:
        return []
    index, error = split.errors[0]
    if index == "len":
        return [Finding("PIPELINE_ROWS_MISSING", "error", "data",
                        f"{split.name}: len(dataset) raised {error}: no pass can be read",
                        "make __len__ return the number of examples", {"first_error": error})]
    readable = len(split.indices)
    return [Finding(
        "PIPELINE_ROWS_MISSING", "error", "data",
        f"{split.name}: reading example {index} raised {error} ({len(split.errors)} of the "
        f"{readable + len(split.errors)} reads raised): indices inside len(dataset) = "
        f"{split.length} cannot be read",
        "make __getitem__ work for every index in range(len(dataset)); __len__ may count "
        "more examples than the storage holds",
        {"errors": len(split.errors), "example_indices": [i for i, _ in split.errors[:EXAMPLES]],
         "first_error": error})]


def _sampler_rows(split):
    passed = split.pass_indices
    if split.sampler_gap is not None:
        return [_sampler_gap(split)]
    if passed is None or split.sampler_kind in ("with-replacement", "partial"):
        return []
    if split.sampler_kind == "subset":
        source = np.unique(split.subset_indices)
        counts = _counts(passed, split.subset_indices)
        expected = split.subset_indices
        what_source = f"its SubsetRandomSampler's {len(expected)} indices"
    else:
        source = np.arange(split.length)
        counts = np.bincount(passed[(passed >= 0) & (passed < split.length)],
                             minlength=split.length)
        what_source = f"len(dataset) = {split.length}"
    duplicates = int(np.sum(np.maximum(counts - 1, 0)))
    missing = np.flatnonzero(counts == 0)
    outside = int(np.sum((passed < 0) | (passed >= split.length)))
    tolerated = 0
    if split.drop_last and split.batch_size and split.shuffled:
        tolerated = split.batch_size - 1     # a different remainder each epoch: by design
    if duplicates == 0 and outside == 0 and len(missing) <= tolerated:
        return []
    distinct = len(source) - len(missing)
    parts = []
    if len(missing):
        parts.append(f"{len(missing)} never yielded, e.g. indices {_shown(missing)}")
    if duplicates:
        parts.append(f"{duplicates} yielded more than once")
    if outside:
        parts.append(f"{outside} outside the data set")
    if split.drop_last and len(missing) and not duplicates:
        parts.append("drop_last drops the same tail every epoch")
    message = (f"{split.name}: one pass yields {distinct} distinct of the source's "
               f"{len(source)} examples (the sampler's {len(passed)} indices against "
               f"{what_source}: {'; '.join(parts)})")
    return [Finding("PIPELINE_ROWS_MISSING", "warning", "data", message, _fix(),
                    {"distinct": distinct, "source": len(source), "missing": len(missing),
                     "duplicates": duplicates, "outside": outside,
                     "example_missing": missing[:EXAMPLES], "where": "sampler"})]


def _sampler_gap(split):
    """A sampler meant to draw from part of the data or with weights that, as configured,
    cannot reach some examples at all."""
    passed = split.pass_indices
    distinct = (len(np.unique(passed[(passed >= 0) & (passed < split.length)]))
                if passed is not None else None)
    seen = (f"one pass yields {distinct} distinct of the source's {split.length} examples: "
            if distinct is not None else "")
    return Finding("PIPELINE_ROWS_MISSING", "warning", "data",
                   f"{split.name}: {seen}{split.sampler_gap}", _fix(),
                   {"distinct": distinct, "source": split.length, "where": "sampler"})


def _iterable_rows(split):
    """An IterableDataset's pass: fewer examples than its ``__len__``, or repeats."""
    if not split.pass_complete or split.errors:
        return []
    distinct, yielded, length = split.distinct_yielded, split.yielded, split.length
    short = length is not None and distinct < length
    repeated = distinct < yielded and _judgeable(split.xs)
    if not (short or repeated):
        return []
    source = length if length is not None else yielded
    parts = [f"its iteration ended after {yielded} examples"]
    if length is not None:
        parts.append(f"len(dataset) is {length}")
    if distinct < yielded:
        parts.append(f"{yielded - distinct} of them repeat another")
    return [Finding(
        "PIPELINE_ROWS_MISSING", "warning", "data",
        _message(split, distinct, "; ".join(parts), source),
        "make one pass of __iter__ yield every example once (drain a shuffle buffer at the "
        "end; give each worker its own share)",
        {"distinct": distinct, "source": source, "yielded": yielded, "where": "__iter__"})]


def _judgeable(xs):
    """Examples that cannot be equal by nature: at least ``MIN_VALUES`` values, or floats
    that are not all whole numbers (measurements)."""
    if not xs or xs[0] is None:
        return False
    first = xs[0]
    return first.size >= MIN_VALUES or (
        first.dtype.kind == "f" and not np.array_equal(first, np.round(first)))


def _counts(passed, indices):
    values, counts = np.unique(passed, return_counts=True)
    lookup = dict(zip(values.tolist(), counts.tolist()))
    return np.array([lookup.get(int(i), 0) for i in np.unique(indices)])


def _content_duplicates(split, storage=None):
    """Distinct indices that yield the same example (within the augmentation noise); or one
    stored example mirrored or turned at neighbouring indices (deterministic views, by design
    when every stored example is served: judged only against ``storage``, the length of the
    dataset's longest per-example storage)."""
    indices, xs = split.indices, split.xs
    if len(indices) < 8 or not _stackable(xs) or not _judgeable(xs):
        return []
    rows = np.stack([x.reshape(-1) for x in xs]).astype(np.float64)
    ys = split.ys
    if ys[0] is not None and _stackable(ys):
        rows = np.concatenate([rows, np.stack([y.reshape(-1) for y in ys]).astype(np.float64)],
                              axis=1)
    noise = _reread_distance(split)
    twins = _twins(rows, noise)
    if twins is None:
        return []
    twinned, pairs = twins
    source = split.length
    views = ""
    if len(twinned) / len(indices) < DUPLICATE_SHARE:
        turned = _turned_twins(split)
        served = split.length * _groups(len(indices), turned) / len(indices)
        if not turned or storage is None or served >= (1 - DUPLICATE_SHARE) * storage:
            return []
        twinned, pairs, source = sorted({i for pair in turned for i in pair}), turned, storage
        views = " (one stored example mirrored or turned at neighbouring indices)"
    share = len(twinned) / len(indices)
    if share < DUPLICATE_SHARE or len(pairs) < 3:
        return []
    index = np.asarray(indices)
    pair_text = ", ".join(f"{index[a]} and {index[b]}" for a, b in pairs[:3])
    # distinct examples in the pass, extrapolated from the share of indices read with a twin
    groups = _groups(len(indices), pairs)
    distinct = int(round(split.length * groups / len(indices)))
    noisy = " (equal up to the dataset's own augmentation noise)" if noise > 0 else views
    return [Finding(
        "PIPELINE_ROWS_MISSING", "warning", "data",
        _message(split, distinct, f"of {len(indices)} indices read, {len(twinned)} yield the "
                 f"same example as another index{noisy}, e.g. indices {pair_text}; the other "
                 f"rows of the source are never read", source),
        _fix(),
        {"distinct": distinct, "source": source, "indices_read": len(indices),
         "indices_with_twin": len(twinned), "example_pairs": [[int(index[a]), int(index[b])]
                                                             for a, b in pairs[:EXAMPLES]],
         "reread_distance": noise, "where": "__getitem__"})]


def _turned_twins(split):
    """Pairs of neighbouring indices whose inputs are one image mirrored or turned (or one
    sequence reversed), with equal targets: one example served twice (``idx // 2`` with a
    flip on odd indices)."""
    pairs = []
    for a in range(len(split.indices) - 1):
        if split.indices[a + 1] != split.indices[a] + 1:
            continue
        x1, x2, y1, y2 = split.xs[a], split.xs[a + 1], split.ys[a], split.ys[a + 1]
        if x1 is None or x2 is None or x1.shape != x2.shape or x1.ndim == 0:
            continue
        if (y1 is None) != (y2 is None) or (y1 is not None and not np.array_equal(y1, y2)):
            continue
        if np.array_equal(x1, x2):
            continue
        if any(np.array_equal(variant, x2) for variant in _variants(x1)):
            pairs.append((a, a + 1))
    return pairs


def _variants(x):
    if x.ndim >= 2 and min(x.shape[-2:]) >= 4:
        for k in range(4):
            turned = np.rot90(x, k, axes=(-2, -1))
            yield turned
            yield turned[..., ::-1]
    elif x.ndim == 1 and x.size >= MIN_VALUES:
        yield x[::-1]


def _stackable(arrays):
    return (arrays and all(a is not None for a in arrays)
            and len({a.shape for a in arrays}) == 1)


def _reread_distance(split):
    """The median distance between two reads of one index (0 without random transforms)."""
    distances = []
    for _, x1, y1, x2, y2 in split.repeats:
        if x1 is None or x2 is None or x1.shape != x2.shape:
            continue
        d = np.sum((x1.astype(np.float64) - x2.astype(np.float64)) ** 2)
        if y1 is not None and y2 is not None and y1.shape == y2.shape:
            d += np.sum((y1.astype(np.float64) - y2.astype(np.float64)) ** 2)
        distances.append(np.sqrt(d))
    return float(np.median(distances)) if distances else 0.0


def _twins(rows, noise):
    """``(rows with a twin, [(a, b)])``: pairs of rows equal (noise 0) or within the re-read
    noise and far below the typical nearest-neighbour distance; None if not judgeable."""
    if noise == 0.0:
        _, inverse, counts = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        twinned = np.flatnonzero(counts[inverse] > 1)
        first = {}
        pairs = []
        for row in twinned:
            group = int(inverse[row])
            if group in first:
                pairs.append((first[group], int(row)))
            else:
                first[group] = int(row)
        return twinned, pairs
    if len(rows) <= REFERENCE_K + 1:
        return None
    nearest, distance = nearest_rows(rows)
    typical = distinct_scale(rows)     # the k-th neighbour: past any copies of one example
    limit = NOISE_FACTOR * noise
    if limit >= DISTINCT_SHARE * typical:
        return None     # augmentation as strong as the data's own spread: cannot tell
    close = np.flatnonzero(distance <= limit)
    pairs = sorted({(min(int(a), int(nearest[a])), max(int(a), int(nearest[a]))) for a in close})
    return close, pairs


def _groups(count, pairs):
    """Connected groups among ``count`` rows joined by ``pairs`` (union-find, iterative)."""
    parent = list(range(count))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in pairs:
        parent[root(a)] = root(b)
    return len({root(i) for i in range(count)})


# ---------------------------------------------------------------- storage
def _length_vs_storage(dataset, split, other_dataset):
    """Per-example storage longer than ``len(dataset)``: its tail is never read."""
    if split.length is None or split.length == 0:
        return []
    columns = _columns(dataset)
    if not columns:
        return []
    length = split.length
    longer = {name: size for name, size, _ in columns if length < size < 2 * length}
    if not longer:
        return []
    shared = {id(value) for _, _, value in _columns(other_dataset)} if other_dataset else set()
    if any(id(value) in shared for name, _, value in columns if name in longer):
        return []     # the other split reads the rest of the same storage (a split by range)
    # an index list of the dataset's own, or a column of exactly len() that holds indices
    for name, size, value in columns:
        if size == length and _is_index_list(value, max(longer.values())):
            return []
    window = _window(split)
    if window and all(size - length <= window for size in longer.values()):
        return []     # windows over a sequence: its last rows are read by the last window
    name, size = max(longer.items(), key=lambda item: item[1])
    equal = [n for n, s, _ in columns if s == length]
    also = (f"; {', '.join(equal[:3])} {'has' if len(equal) == 1 else 'have'} {length} "
            f"entries: the two no longer line up" if equal else "")
    return [Finding(
        "PIPELINE_ROWS_MISSING", "warning", "data",
        _message(split, length, f"len(dataset) is {length} but the dataset's {name} holds "
                 f"{size}: its last {size - length} never reach a batch{also}", size),
        _fix(),
        {"distinct": length, "source": size, "missing": size - length, "storage": name,
         "where": "__len__"})]


def _columns(dataset):
    columns = []
    for name, value in getattr(dataset, "__dict__", {}).items():
        if isinstance(value, (str, bytes, dict)) or callable(value) and not hasattr(
                value, "__len__"):
            continue
        if not (isinstance(value, (list, tuple, np.ndarray)) or (
                hasattr(value, "shape") and hasattr(value, "__len__"))):
            continue
        try:
            size = len(value)
        except Exception:
            continue
        if size >= 2:
            columns.append((name, int(size), value))
    return columns


def _is_index_list(value, size):
    try:
        array = np.asarray(value)
    except Exception:
        return False
    return (array.ndim == 1 and array.dtype.kind in "iu" and array.size > 0
            and int(array.min()) >= 0 and int(array.max()) < size)


def _window(split):
    """The length of a sliding window (+1) when neighbouring indices yield windows one step
    apart (``x[i + 1][:-1] == x[i][1:]``), else 0."""
    steps = matched = 0
    for a in range(len(split.indices) - 1):
        if split.indices[a + 1] != split.indices[a] + 1:
            continue
        first, second = split.xs[a], split.xs[a + 1]
        if first is None or second is None or first.ndim == 0 or first.shape != second.shape \
                or first.shape[0] < 2:
            continue
        steps += 1
        matched += bool(np.array_equal(first[1:], second[:-1]))
    return split.xs[0].shape[0] + 1 if steps and matched >= 0.8 * steps else 0


def _shown(values):
    shown = ", ".join(str(int(v)) for v in values[:EXAMPLES])
    return shown + (", ..." if len(values) > EXAMPLES else "")
