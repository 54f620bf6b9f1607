"""Reading a pipeline: the examples a Dataset (through its transforms) or DataLoader yields.

``read_split(source, budget=, seed=, argument=)`` reads at most ``budget`` examples of a
map-style Dataset (``len`` and ``[i]``) or of a DataLoader over one, in the main process,
through the dataset's own ``__getitem__`` (its transforms included; the loader's workers and
collate function are not used), and returns a ``Split``:

- the indices of one pass, read from the loader's ``batch_sampler`` (or ``sampler``) without
  loading any data; a bare Dataset's pass is ``range(len)``;
- the examples read: the first indices of the pass in order (what the loader yields first),
  then indices spread over the data set, each with its next index (``i`` and ``i + 1``, where an
  ``idx // 2`` bug yields one example twice);
- a few indices read a second time (``repeats``): the dataset's own augmentation noise, and the
  pairs the one-sided transform check compares;
- every exception the user's code raised, with the index that raised it.

Nothing the user owns changes: the global torch, NumPy and Python random states, the
samplers' and the dataset's own generators are put back as they were (``preserved_rng``).
"""
import random
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ...backends import numpy_of
from ...progress import progress_bar

REPEATS = 32            # indices read twice (augmentation noise, one-sided transforms)
STREAM_BATCHES = 16     # runs of the pass read in order (label order), spread over the pass
STREAM_BATCH = 32       # their length without a loader's batch size (at most 256)
MAX_ERRORS = 8          # exceptions quoted before reading stops
MAX_PASS_INDICES = 10_000_000   # a sampler longer than this is not listed
ITERABLE_PASS = 8       # an IterableDataset's pass is followed for this many budgets
X_KEYS = ("pixel_values", "input_ids", "image", "images", "img", "x", "input", "inputs",
          "data", "features", "audio", "input_values")
Y_KEYS = ("labels", "label", "target", "targets", "y", "mask", "masks", "segmentation",
          "class", "classes")


@dataclass
class Split:
    """What was read of one split (see the module docstring)."""

    name: str
    length: int | None                 # len(dataset); None for an iterable dataset
    pass_indices: np.ndarray | None    # the indices of one pass, in order; None if unknown
    sampler_kind: str = "none"         # "covering", "subset", "with-replacement", "partial"
    subset_indices: np.ndarray | None = None   # a SubsetRandomSampler's indices
    batch_size: int | None = None
    drop_last: bool = False
    shuffled: bool | None = None       # None: unknown (a custom sampler)
    indices: list = field(default_factory=list)   # dataset index of each example read
    xs: list = field(default_factory=list)        # inputs, as arrays
    ys: list = field(default_factory=list)        # targets, as arrays (or None)
    repeats: list = field(default_factory=list)   # (index, x1, y1, x2, y2)
    errors: list = field(default_factory=list)    # (index, "ExcType: message")
    stream_batches: list = field(default_factory=list)   # consecutive runs of the pass
    iterable: bool = False             # an IterableDataset: one pass iterated, not indexed
    pass_complete: bool = False        # ... to its end
    yielded: int = 0                   # ... examples it yielded
    distinct_yielded: int = 0          # ... distinct ones among them (by content)
    batches_in_pass: int | None = None
    sampler_gap: str | None = None     # why a sampler cannot reach every index, in words
    sample_weights: np.ndarray | None = None   # a weighted sampler's weight per example


def is_dataloader(value):
    return hasattr(value, "dataset") and hasattr(value, "batch_sampler") and hasattr(
        value, "sampler")


def is_map_dataset(value):
    if isinstance(value, (list, tuple, str, bytes, dict)) or numpy_of(value) is not None:
        return False
    if is_iterable_dataset(value):
        return False
    return callable(getattr(value, "__getitem__", None)) and callable(
        getattr(value, "__len__", None))


def is_iterable_dataset(value):
    """A torch ``IterableDataset`` (examples by iteration only)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.utils.data.IterableDataset)


def read_split(source, *, budget, seed, name):
    """A ``Split`` of ``source`` (a DataLoader or a map-style Dataset); see the module doc."""
    loader = source if is_dataloader(source) else None
    dataset = source.dataset if loader is not None else source
    rng = np.random.default_rng(seed)
    collate = _custom_collate(loader)
    with preserved_rng(loader, dataset):
        _seed_globals(seed, name)
        if is_iterable_dataset(dataset):
            return _read_iterable(dataset, budget, name)
        split = _describe(loader, dataset, name)
        if split.length is None:
            return split
        order = _reading_order(split, budget, rng)
        group = max(1, min(split.batch_size or STREAM_BATCH, 256)) if collate else 1
        with progress_bar(len(order) + REPEATS, desc=f"validate_data: reading {name}") as bar:
            for start in range(0, len(order), group):
                if len(split.errors) >= MAX_ERRORS:
                    break
                _read_group(dataset, [int(i) for i in order[start:start + group]], split,
                            collate)
                bar.update(min(group, len(order) - start))
            _read_repeats(dataset, split, rng, collate)
            bar.update(REPEATS)
    return split


def _custom_collate(loader):
    """The loader's collate_fn when it is the user's own (the default one changes nothing
    the checks read)."""
    if loader is None:
        return None
    collate = getattr(loader, "collate_fn", None)
    if collate is None or getattr(collate, "__name__", "") in ("default_collate",
                                                               "default_convert"):
        return None
    return collate


def _read_iterable(dataset, budget, name):
    """One pass of an IterableDataset: its first ``budget`` examples kept, every example of
    the pass (up to ``ITERABLE_PASS`` budgets) counted and hashed."""
    try:
        length = len(dataset)
    except Exception:
        length = None
    split = Split(name=name, length=length, pass_indices=None, iterable=True)
    hashes = set()
    cap = ITERABLE_PASS * budget
    try:
        for position, item in enumerate(dataset):
            if position >= cap:
                split.pass_complete = False
                break
            x, y = split_item(item)
            hashes.add(_digest(x, y))
            split.yielded += 1
            if len(split.xs) < budget:
                split.indices.append(position)
                split.xs.append(x)
                split.ys.append(y)
        else:
            split.pass_complete = True
    except Exception as error:
        split.errors.append((split.yielded, f"{type(error).__name__}: {error}"))
    split.distinct_yielded = len(hashes)
    return split


def _digest(x, y):
    parts = [b"" if a is None else (str(a.shape).encode() + a.tobytes()) for a in (x, y)]
    return hash(parts[0] + b"|" + parts[1])


def _describe(loader, dataset, name):
    try:
        length = len(dataset)
    except Exception as error:    # the user's __len__ raised: a finding
        split = Split(name=name, length=None, pass_indices=None)
        split.errors.append(("len", f"{type(error).__name__}: {error}"))
        return split
    split = Split(name=name, length=int(length), pass_indices=np.arange(int(length)))
    if loader is None:
        return split
    sampler = loader.sampler
    split.batch_size = getattr(loader, "batch_size", None)
    split.drop_last = bool(getattr(loader, "drop_last", False))
    kind = type(sampler).__name__
    split.shuffled = {"SequentialSampler": False, "RandomSampler": True,
                      "SubsetRandomSampler": True}.get(kind)
    if kind == "SubsetRandomSampler":
        split.sampler_kind = "subset"
        split.subset_indices = np.asarray(list(sampler.indices), dtype=np.int64)
    elif (getattr(sampler, "replacement", False) or hasattr(sampler, "weights")
          or (kind == "RandomSampler" and getattr(sampler, "num_samples", length) != length)):
        split.sampler_kind = "with-replacement"
        split.sampler_gap = _short_weights(sampler, length)
        weights = getattr(sampler, "weights", None)
        if split.sampler_gap is None and weights is not None and len(weights) == length:
            split.sample_weights = np.asarray(numpy_of(weights) if numpy_of(weights) is not None
                                              else weights, dtype=np.float64)
    elif hasattr(sampler, "num_replicas") and getattr(sampler, "num_replicas", 1) > 1:
        split.sampler_kind = "partial"    # one rank's share (DistributedSampler)
        split.sampler_gap = _replicas_without_ranks(sampler)
    else:
        split.sampler_kind = "covering"
    split.pass_indices = _pass_indices(loader, length)
    try:
        split.batches_in_pass = len(loader)
    except Exception:
        split.batches_in_pass = None
    return split


def _short_weights(sampler, length):
    """A weighted sampler holding fewer weights than the data set has examples: the indices
    past its weights are never drawn (a weight per class given where one per example was
    meant)."""
    weights = getattr(sampler, "weights", None)
    count = len(weights) if weights is not None and hasattr(weights, "__len__") else None
    if count is None or count >= length:
        return None
    return (f"its {type(sampler).__name__} holds {count} weights for a data set of {length} "
            f"examples: indices {count} to {length - 1} are never drawn (one weight per "
            f"example is meant, e.g. class_weights[labels])")


def _replicas_without_ranks(sampler):
    """A DistributedSampler split among more replicas than the process group has ranks: the
    other shares are read by no one."""
    replicas = int(getattr(sampler, "num_replicas", 1))
    try:
        import torch.distributed as dist
        world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    except Exception:   # no torch.distributed: one process
        world = 1
    if replicas <= world:
        return None
    return (f"its {type(sampler).__name__} splits the data among num_replicas={replicas}, "
            f"but this process group has {world} rank{'s' if world > 1 else ''}: "
            f"{replicas - world} of the {replicas} shares are read by no one")


def _pass_indices(loader, length):
    """The dataset indices of one pass, flattened from the batch sampler, or None."""
    source = loader.batch_sampler if loader.batch_sampler is not None else loader.sampler
    cap = max(4 * length, 1024)
    flat = []
    try:
        for item in source:
            if isinstance(item, (list, tuple)) or numpy_of(item) is not None:
                flat.extend(int(i) for i in (numpy_of(item) if numpy_of(item) is not None
                                             else item))
            else:
                flat.append(int(item))
            if len(flat) > min(cap, MAX_PASS_INDICES):
                return None    # an endless sampler: no one pass to read
    except Exception:
        return None
    return np.asarray(flat, dtype=np.int64)


def _stream_batches(split, budget):
    """Up to ``STREAM_BATCHES`` runs of consecutive pass positions, evenly spread over it."""
    passed = split.pass_indices
    if passed is None or len(passed) == 0:
        return []
    size = int(min(split.batch_size or STREAM_BATCH, 256, max(2, budget // (2 * STREAM_BATCHES))))
    runs = max(1, min(STREAM_BATCHES, len(passed) // size))
    starts = np.linspace(0, len(passed) - size, runs).astype(int) if len(passed) > size else [0]
    batches = []
    for start in starts:
        run = [int(i) for i in passed[start:start + size] if 0 <= int(i) < split.length]
        if run:
            batches.append(run)
    return batches


def _reading_order(split, budget, rng):
    """Dataset indices to read: runs of the pass in order, then spread ones with their
    neighbours, then the last two."""
    length = split.length
    if length == 0:
        return []
    split.stream_batches = _stream_batches(split, budget)
    if length <= budget:
        return list(range(length))
    first = list(dict.fromkeys(i for run in split.stream_batches for i in run))
    seen = set(first)
    order = list(first)
    pairs = (budget - len(order)) // 2
    starts = rng.choice(max(length - 1, 1), size=min(pairs, max(length - 1, 1)), replace=False)
    for start in np.sort(starts):
        for index in (int(start), int(start) + 1):
            if index < length and index not in seen and len(order) < budget:
                seen.add(index)
                order.append(index)
    for index in (length - 2, length - 1):     # the tail, where a short __len__ bites
        if index >= 0 and index not in seen:
            order.append(index)
            seen.add(index)
    return order


def _read_group(dataset, indices, split, collate):
    """Read ``indices`` (through ``collate`` as one batch, then split into examples); an
    exception of the user's code is recorded, not raised."""
    items = []
    for index in indices:
        try:
            items.append((index, dataset[index]))
        except Exception as error:   # the user's code raised: a finding, not a traceback
            split.errors.append((index, f"{type(error).__name__}: {error}"))
    if not items:
        return
    try:
        examples = (unbatch(collate([item for _, item in items]), len(items)) if collate
                    else [item for _, item in items])
        pairs = [split_item(example) for example in examples]
    except Exception as error:
        split.errors.append((items[0][0], f"{type(error).__name__} in collate_fn: {error}"))
        return
    for (index, _), (x, y) in zip(items, pairs):
        split.indices.append(index)
        split.xs.append(x)
        split.ys.append(y)


def _read_repeats(dataset, split, rng, collate=None):
    if not split.indices:
        return
    picks = rng.choice(len(split.indices), size=min(REPEATS, len(split.indices)), replace=False)
    for pick in picks:
        index = split.indices[int(pick)]
        try:
            item = dataset[index]
            x2, y2 = split_item(unbatch(collate([item]), 1)[0] if collate else item)
        except Exception as error:
            split.errors.append((index, f"{type(error).__name__}: {error}"))
            continue
        split.repeats.append((index, split.xs[int(pick)], split.ys[int(pick)], x2, y2))


def unbatch(batch, count):
    """The ``count`` examples of a collated batch (arrays/tensors split on their first axis,
    tuples, lists and dicts of them element by element)."""
    if isinstance(batch, dict):
        parts = {k: unbatch(v, count) for k, v in batch.items()}
        return [{k: parts[k][i] for k in parts} for i in range(count)]
    if isinstance(batch, (tuple, list)):
        if len(batch) == count and all(isinstance(v, (tuple, list, dict)) for v in batch):
            return list(batch)     # a collate_fn that keeps the items as they are
        if len(batch) == count and not any(isinstance(v, (tuple, list, dict)) for v in batch) \
                and not all(numpy_of(v) is not None and getattr(v, "ndim", 0) > 0
                            and len(v) == count for v in batch):
            return list(batch)     # a list with one entry per example
        parts = [unbatch(v, count) for v in batch]
        return [tuple(part[i] for part in parts) for i in range(count)]
    array = numpy_of(batch)
    if array is not None and array.ndim > 0 and len(array) == count:
        return [array[i] for i in range(count)]
    return [batch] * count


def split_item(item):
    """``(x, y or None)`` of one dataset item: a pair, a dict, or an input alone."""
    if isinstance(item, dict):
        x = next((item[k] for k in X_KEYS if k in item), None)
        y = next((item[k] for k in Y_KEYS if k in item), None)
        values = [v for v in item.values() if _array(v) is not None]
        if x is None and values:
            x = values[0]
        if y is None and len(values) > 1:
            y = next(v for v in values if v is not x)
        return _array(x), _array(y)
    if isinstance(item, (tuple, list)) and not _is_number_list(item):
        if len(item) > 2:      # (inputs..., target): the measured inputs side by side
            inputs = [_array(v) for v in item[:-1]]
            if all(v is not None for v in inputs):
                floats = [v for v in inputs if v.dtype.kind == "f"] or inputs
                if len(floats) == 1:
                    return floats[0], _array(item[-1])
                flat = np.concatenate([v.reshape(-1).astype(np.float64) for v in floats])
                return flat, _array(item[-1])
        return _array(item[0]), (_array(item[1]) if len(item) > 1 else None)
    return _array(item), None


def _is_number_list(item):
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in item)


def _array(value):
    if value is None:
        return None
    array = numpy_of(value)
    if array is None:
        try:
            array = np.asarray(value)     # PIL images, numbers, lists of numbers
        except Exception:
            return None
    if array.dtype.kind not in "biuf":
        return None
    return np.array(array, copy=True)


# --------------------------------------------------------------------- RNG
@contextmanager
def preserved_rng(loader, dataset):
    """Put back every random state the reading may move: torch's, NumPy's and Python's global
    ones, and the generators the loader, its samplers and the dataset hold."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    owned = _owned_generators([loader, getattr(loader, "sampler", None),
                               getattr(loader, "batch_sampler", None),
                               getattr(getattr(loader, "batch_sampler", None), "sampler", None),
                               dataset, getattr(dataset, "transform", None),
                               getattr(dataset, "dataset", None)])
    saved = [(g, _state_of(g)) for g in owned]
    fork = _torch_fork()
    try:
        with fork:
            yield
    finally:
        np.random.set_state(numpy_state)
        random.setstate(python_state)
        for generator, state in saved:
            _restore(generator, state)


def _seed_globals(seed, name):
    """Seed the (forked) global generators per split: the same call reads the same draws,
    whatever state the user left, and two splits of one random pipeline differ."""
    value = (seed * 1_000_003 + sum(ord(c) for c in name)) % (2**31)
    np.random.seed(value)
    random.seed(value)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(value)


def _torch_fork():
    try:
        import torch
    except ImportError:
        return _nothing()
    return torch.random.fork_rng(devices=[])


@contextmanager
def _nothing():
    yield


def _owned_generators(objects):
    found, seen = [], set()
    for owner in objects:
        if owner is None:
            continue
        values = [owner] + list(getattr(owner, "__dict__", {}).values())
        for value in values:
            if id(value) in seen or _state_of(value) is None:
                continue
            seen.add(id(value))
            found.append(value)
    return found


def _state_of(value):
    if isinstance(value, np.random.Generator):
        return value.bit_generator.state
    if isinstance(value, np.random.RandomState):
        return value.get_state()
    if isinstance(value, random.Random):
        return value.getstate()
    if type(value).__name__ == "Generator" and hasattr(value, "get_state") and hasattr(
            value, "set_state"):
        return value.get_state()
    return None


def _restore(generator, state):
    if isinstance(generator, np.random.Generator):
        generator.bit_generator.state = state
    elif isinstance(generator, np.random.RandomState):
        generator.set_state(state)
    elif isinstance(generator, random.Random):
        generator.setstate(state)
    else:
        generator.set_state(state)
