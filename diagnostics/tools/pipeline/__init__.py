"""``validate_data`` over a pipeline: a Dataset (its transforms included) or a DataLoader.

``read_pipeline`` samples a split within a budget (``read.py``); ``pipeline_findings`` judges
what was read: rows duplicated or lost in one pass (``rows.py``), train/test inputs shifted
by their transforms (``shift.py``), random transforms applied to the input and not its
aligned target (``one_sided.py``), test examples that are near-copies of training ones
(``near_duplicates.py``) and a training loader that yields labels in sorted order
(``label_checks``, shared with ``check_batch_label_order``).
"""
from dataclasses import dataclass

import numpy as np

from ..label_checks import check_batch_label_order
from .near_duplicates import near_duplicate_findings
from .one_sided import one_sided_findings
from .read import Split, is_dataloader, is_iterable_dataset, is_map_dataset, read_split
from .rows import rows_findings
from .shift import shift_findings

DEFAULT_BUDGET = 4096


@dataclass
class Read:
    """A split read from a pipeline: the ``Split`` and the examples stacked (or None when
    their shapes differ), with the dataset it came from."""

    split: Split
    dataset: object
    loader: object
    x: np.ndarray | None
    y: np.ndarray | None


def is_pipeline(value):
    """A DataLoader over a Dataset, a map-style Dataset, or an IterableDataset."""
    if is_dataloader(value):
        return is_map_dataset(value.dataset) or is_iterable_dataset(value.dataset)
    return is_map_dataset(value) or is_iterable_dataset(value)


def read_pipeline(source, *, budget, name, seed=0):
    split = read_split(source, budget=budget, seed=seed, name=name)
    loader = source if is_dataloader(source) else None
    dataset = source.dataset if loader is not None else source
    return Read(split=split, dataset=dataset, loader=loader, x=_stack(split.xs),
                y=_stack(split.ys))


def _stack(arrays):
    if not arrays or any(a is None for a in arrays) or len({a.shape for a in arrays}) != 1:
        return None
    return np.stack(arrays)


def pipeline_findings(train, test, *, train_x, test_x, exact_test_rows=()):
    """Findings of the pipeline checks. ``train``/``test``: ``Read`` or None (arrays);
    ``train_x``/``test_x``: the inputs as arrays (read or given)."""
    findings = []
    for read, other in ((train, test), (test, train)):
        if read is not None:
            findings.extend(rows_findings(read.split, read.dataset,
                                          other_dataset=None if other is None else other.dataset))
    if train is not None and train.loader is not None:
        findings.extend(_label_order(train))
    if test_x is not None and train_x is not None:
        findings.extend(shift_findings(train_x, test_x))
        findings.extend(near_duplicate_findings(train_x, test_x,
                                                exact_test_rows=exact_test_rows))
    for read in (train, test):
        if read is not None:
            findings.extend(one_sided_findings(read.split))
    return findings


def _label_order(read):
    """LABELS_SORTED on runs of the training loader's pass, in the order it yields them."""
    split = read.split
    if split.shuffled:
        return []
    position = {index: i for i, index in enumerate(split.indices)}
    batches = []
    for run in split.stream_batches:
        labels = [split.ys[position[i]] for i in run if i in position]
        if len(labels) >= 2 and all(y is not None and y.size == 1 for y in labels):
            batches.append(np.array([y.reshape(()) for y in labels]))
    if len(batches) < 2:
        return []
    return list(check_batch_label_order(batches))
