"""``validate_data``: the data checks to run before blaming the model.

NaN/Inf values (DATA_NONFINITE), test rows that also appear in the training set (DATA_LEAKAGE,
by hashing whole rows, then confirming each hit byte for byte), classes outnumbering others
more than 10:1 (LABEL_IMBALANCE), features far from zero mean and unit variance, and constant
features (UNNORMALIZED_INPUT), and, given ``num_classes`` (the model's output width), class
labels the output lacks or output units no label uses (LABEL_RANGE), and train and test
inputs whose per-feature (per-channel) distributions differ far beyond sampling noise
(TRANSFORM_SHIFT, the pipeline's rule: a test split never standardised). Each finding carries
counts and example indices.

Given a pipeline instead of arrays (a torch Dataset or a DataLoader, for training and with
``test=``), the examples are read through the user's transforms and collate_fn within a budget
(``diagnostics/tools/pipeline``), judged by the checks above, and by the pipeline's own:
PIPELINE_ROWS_MISSING, TRANSFORM_SHIFT, TRANSFORM_ONE_SIDED, near-duplicate DATA_LEAKAGE and
LABELS_SORTED. The report iterates over its findings.
"""
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ..backends import numpy_of
from ..errors import DiagnosticsError, require
from ..findings import Finding
from ..jsonable import to_jsonable
from .label_checks import check_label_range
from .pipeline import DEFAULT_BUDGET, is_pipeline, pipeline_findings, read_pipeline
from .pipeline.shift import shift_findings

IMBALANCE_RATIO = 10.0
MEAN_LIMIT = 3.0          # a feature's |mean| above this is "far from zero"
STD_LIMITS = (0.01, 10.0)  # a feature's std outside this is "far from one" (below: only when
                           # the median feature's std is below it too)
EXAMPLES = 5              # example indices shown per finding
MAX_BATCHES = 200         # batches read from a DataLoader (an iterable of (x, y) batches)
_MIX = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class DataReport:
    """``findings`` (warnings and errors mean trouble; info is worth knowing) and the counts;
    iterating the report (``for finding in report``) goes over its findings."""

    findings: list
    counts: dict = field(default_factory=dict)

    @property
    def passed(self):
        return not any(f.is_alarm for f in self.findings)

    def __iter__(self):
        return iter(self.findings)

    def __len__(self):
        return len(self.findings)

    def __getitem__(self, index):
        return self.findings[index]

    def to_dict(self):
        return to_jsonable({"passed": self.passed, "counts": self.counts,
                            "findings": [finding.to_dict() for finding in self.findings]})

    @property
    def sizes(self):
        """The counts that are numbers, in words: ``train_rows 477, test_rows 175, ...``."""
        return ", ".join(f"{k} {v}" for k, v in self.counts.items() if not isinstance(v, dict))

    def __str__(self):
        head = f"data validation: {'PASSED' if self.passed else 'FAILED'} ({self.sizes})"
        lines = [head] + [f"  {line}" for finding in self.findings
                          for line in str(finding).splitlines()]
        if not self.findings:
            lines.append("  no findings")
        return "\n".join(lines)


def validate_data(train=None, train_y=None, *, test=None, test_x=None, test_y=None,
                  num_classes=None, budget=DEFAULT_BUDGET, train_x=None):
    """Check a data set: arrays or tensors, or a pipeline (a Dataset or a DataLoader).

    Args:
        train: the training inputs, one example per row (first axis) as an array or tensor
            (torch, minigrad) with ``train_y`` its targets; or an iterable of ``(x, y)``
            batches (its first ``MAX_BATCHES`` batches are concatenated); or a map-style
            torch ``Dataset`` or a ``DataLoader`` over one, read through its own transforms
            (at most ``budget`` examples) and judged as a pipeline too. ``train_x=`` is the
            same argument by its older name.
        test: the test split as a Dataset or DataLoader (or arrays: then ``test_x``/``test_y``).
        num_classes: the width of the model's output, for class labels (LABEL_RANGE).
        budget: the examples read per split from a pipeline (default 4096).

    Integer inputs other than uint8 pixels are read as ids or categories (an embedding's input)
    and not judged for scale. A pipeline adds PIPELINE_ROWS_MISSING (rows duplicated or lost
    in one pass: the sampler's indices, examples equal across indices, ``__len__`` against the
    storage it reads), TRANSFORM_SHIFT (train and test inputs that differ per channel after
    their transforms), TRANSFORM_ONE_SIDED (a random flip/crop/shift of the input that its
    aligned target does not follow), near-duplicate DATA_LEAKAGE and LABELS_SORTED (a
    training loader that yields labels or targets in order). An exception raised by the
    dataset or its transforms is a finding, and no random state of the user's changes.

    Raises:
        DiagnosticsError: an argument of the wrong kind, before any work.

    Example:
        >>> for finding in validate_data(train_loader, test=test_set):
        ...     print(finding)
    """
    if train_x is not None:
        require(train is None, "train_x", "to be left out when train is given", "both")
        train = train_x
    require(train is not None, "train", "training inputs, a Dataset or a DataLoader", "None")
    if test is not None:
        require(test_x is None and test_y is None, "test",
                "to be left out when test_x/test_y are given", "both")
        test_x = test
    counts = {}
    reads = {}
    for name, value in (("train", train), ("test", test_x)):
        if value is not None and is_pipeline(value):
            require(isinstance(budget, (int, np.integer)) and not isinstance(budget, bool)
                    and budget >= 16, "budget", "an int >= 16 (examples read per split)",
                    repr(budget))
            require((train_y if name == "train" else test_y) is None, f"{name}_y",
                    f"to be left out when {name} is a Dataset or DataLoader", "both")
    for name, value in (("train", train), ("test", test_x)):
        if value is not None and is_pipeline(value):
            reads[name] = read_pipeline(value, budget=int(budget), name=name)
    if "train" in reads:
        train, train_y = _pipeline_arrays(reads["train"], counts, "train")
    if "test" in reads:
        test_x, test_y = _pipeline_arrays(reads["test"], counts, "test")
    if train is None:
        return _pipeline_only(reads, counts)
    return _validate_arrays(train, train_y, test_x, test_y, num_classes, counts, reads)


def _pipeline_arrays(read, counts, name):
    split = read.split
    counts[f"{name}_examples"] = split.length
    counts[f"{name}_examples_read"] = len(split.indices)
    if split.batches_in_pass is not None and len(split.indices) == split.length:
        counts[f"{name}_batches_read"] = split.batches_in_pass
    return read.x, read.y


def _pipeline_only(reads, counts):
    """The examples could not be stacked (or none could be read): the pipeline checks only."""
    findings = pipeline_findings(reads.get("train"), reads.get("test"), train_x=None,
                                 test_x=None)
    return DataReport(findings=findings, counts=counts)


def _validate_arrays(train_x, train_y, test_x, test_y, num_classes, counts, reads):
    if _is_batches(train_x):
        require(train_y is None, "train_y", "to be left out when train_x is a DataLoader",
                "both")
        train_x, train_y, counts["train_batches_read"] = _from_batches(train_x, "train_x")
    if _is_batches(test_x):
        require(test_y is None, "test_y", "to be left out when test_x is a DataLoader", "both")
        test_x, test_y, counts["test_batches_read"] = _from_batches(test_x, "test_x")
    train_x = _as_array(train_x, "train_x", minimum_ndim=1)
    train_y = None if train_y is None else _as_array(train_y, "train_y", minimum_ndim=1)
    test_x = None if test_x is None else _as_array(test_x, "test_x", minimum_ndim=1)
    test_y = None if test_y is None else _as_array(test_y, "test_y", minimum_ndim=1)
    _check_rows(train_x, train_y, "train_y", "train_x")
    require(test_y is None or test_x is not None, "test_y", "to come with test_x",
            "test_y without test_x")
    require(num_classes is None or train_y is not None, "num_classes", "to come with train_y",
            "num_classes without train_y")
    findings = []
    if test_x is not None and reads and test_x.shape[1:] != train_x.shape[1:]:
        # pipelines may crop for training and feed whole examples to a fully convolutional
        # model at test time: compared by their per-channel statistics only
        findings.append(Finding(
            "DATA_LEAKAGE", "info", "data",
            f"not compared example by example: the train examples have shape "
            f"{train_x.shape[1:]}, the test examples {test_x.shape[1:]}"))
        shape_differs = True
    else:
        shape_differs = False
    if test_x is not None and not shape_differs:
        require(test_x.shape[1:] == train_x.shape[1:], "test_x",
                f"rows of shape {train_x.shape[1:]} like train_x", f"{test_x.shape[1:]}")
    if test_x is not None:
        _check_rows(test_x, test_y, "test_y", "test_x")
    counts = {"train_rows": len(train_x), **counts}
    if test_x is not None:
        counts["test_rows"] = len(test_x)
    for name, array in (("train_x", train_x), ("train_y", train_y), ("test_x", test_x),
                        ("test_y", test_y)):
        if array is not None:
            findings.extend(_nonfinite(array, name))
    leaked = []
    if test_x is not None and not shape_differs:
        leaked = _leaked_rows(train_x, test_x)
        counts["duplicates_train_test"] = len(leaked)
        findings.extend(_leakage_finding(leaked, len(test_x)))
    if train_y is not None:
        classes = _class_counts(train_y)
        if classes is not None:
            counts["class_counts"] = classes
            if not _sampler_balances(reads.get("train"), train_y):
                findings.extend(_imbalance(classes))
        if num_classes is not None:
            findings.extend(check_label_range(train_y, num_classes=num_classes))
    findings.extend(_normalisation(train_x))
    if test_x is not None and not reads:
        # arrays get the pipeline's train-vs-test comparison (one rule, in pipeline/shift.py)
        findings.extend(shift_findings(train_x, test_x, transformed=False))
    if reads:
        findings = pipeline_findings(reads.get("train"), reads.get("test"), train_x=train_x,
                                     test_x=test_x, exact_test_rows=[t for t, _ in leaked]) \
            + findings
    return DataReport(findings=findings, counts=counts)


def _is_batches(value):
    """An iterable of batches (a DataLoader, a list of (x, y) pairs), not an array."""
    return (value is not None and not _array_like(value) and hasattr(value, "__iter__")
            and not isinstance(value, (str, bytes, dict)))


def _array_like(value):
    return (isinstance(value, np.ndarray) or (hasattr(value, "detach") and hasattr(value, "cpu"))
            or isinstance(getattr(value, "data", None), np.ndarray))


def _from_batches(batches, argument):
    """``(x, y or None, batches read)``: the first ``MAX_BATCHES`` ``(x, y)`` batches (or
    ``x`` alone) of ``batches``, concatenated along the rows."""
    xs, ys, read = [], [], 0
    for batch in batches:
        if read == MAX_BATCHES:
            break
        if isinstance(batch, (tuple, list)):
            if not all(_array_like(part) for part in batch) or len(batch) not in (1, 2):
                raise DiagnosticsError(
                    f"{argument}: expected a NumPy array, a tensor, or an iterable of (x, y) "
                    f"batches (a DataLoader), got a {type(batches).__name__} whose item "
                    f"{read} is a {type(batch).__name__} of {len(batch)} "
                    f"{type(batch[0]).__name__ if batch else 'item'}s")
            xs.append(_as_array(batch[0], f"{argument} batch {read} x", minimum_ndim=1))
            if len(batch) == 2:
                ys.append(_as_array(batch[1], f"{argument} batch {read} y", minimum_ndim=1))
        else:
            require(_array_like(batch), argument,
                    "an iterable of (x, y) batches of arrays or tensors (a DataLoader)",
                    f"a batch of type {type(batch).__name__}")
            xs.append(_as_array(batch, f"{argument} batch {read}", minimum_ndim=1))
        read += 1
    require(read > 0, argument, "at least one batch", "an empty iterable")
    require(not ys or len(ys) == len(xs), argument, "every batch an (x, y) pair",
            "some batches without y")
    return np.concatenate(xs), (np.concatenate(ys) if ys else None), read


def _as_array(value, argument, *, minimum_ndim):
    array = numpy_of(value)
    if array is None:
        raise DiagnosticsError(f"{argument}: expected a NumPy array, a tensor, or an iterable "
                               f"of (x, y) batches (a DataLoader), got "
                               f"{type(value).__module__}.{type(value).__qualname__}")
    require(array.ndim >= minimum_ndim and len(array) > 0, argument,
            "at least one row (an array with a first axis of length >= 1)", f"shape {array.shape}")
    require(array.dtype.kind in "biuf", argument, "a numeric or boolean array",
            f"dtype {array.dtype}")
    return array


def _check_rows(x, y, y_name, x_name):
    if y is not None:
        require(len(y) == len(x), y_name, f"{len(x)} rows, one per row of {x_name}", len(y))


def _nonfinite(array, name):
    if array.dtype.kind not in "f":
        return []
    bad = ~np.isfinite(array)
    if not bad.any():
        return []
    rows = np.flatnonzero(bad.reshape(len(array), -1).any(axis=1))
    nans, infs = int(np.isnan(array).sum()), int(np.isinf(array).sum())
    return [Finding("DATA_NONFINITE", "error", "data",
                    f"{name} holds {nans} NaN and {infs} infinite values in {len(rows)} rows "
                    f"(e.g. rows {_examples(rows)})",
                    "drop or impute those rows before training; find where they come from",
                    {"array": name, "nan": nans, "inf": infs, "rows": len(rows),
                     "example_rows": rows[:EXAMPLES]})]


# -------------------------------------------------------------------- leakage
def _leaked_rows(train_x, test_x):
    """``[(test row, train row)]`` for test rows whose bytes equal some training row's."""
    dtype = np.result_type(train_x.dtype, test_x.dtype)
    train, test = _row_bytes(train_x, dtype), _row_bytes(test_x, dtype)
    train_hash, test_hash = _row_hashes(train), _row_hashes(test)
    order = np.argsort(train_hash, kind="stable")
    sorted_hash = train_hash[order]
    spot = np.minimum(np.searchsorted(sorted_hash, test_hash), len(order) - 1)
    candidates = np.flatnonzero(sorted_hash[spot] == test_hash)
    first = order[spot[candidates]]
    same = np.all(train[first] == test[candidates], axis=1)
    pairs = list(zip(candidates[same].tolist(), first[same].tolist()))
    for test_row in candidates[~same]:  # hash collisions: look at the other equal hashes
        position = spot[test_row] + 1
        while position < len(order) and sorted_hash[position] == test_hash[test_row]:
            if np.array_equal(train[order[position]], test[test_row]):
                pairs.append((int(test_row), int(order[position])))
                break
            position += 1
    return sorted(pairs)


def _row_bytes(x, dtype):
    """Rows as bytes of one dtype, -0.0 made 0.0 (equal values, equal bytes), padded to 8 bytes."""
    rows = np.ascontiguousarray(x.reshape(len(x), -1), dtype=dtype)
    if rows.dtype.kind == "f":
        rows = rows + rows.dtype.type(0)
    raw = rows.view(np.uint8).reshape(len(rows), -1)
    pad = (-raw.shape[1]) % 8
    if pad:
        raw = np.concatenate([raw, np.zeros((len(rows), pad), np.uint8)], axis=1)
    return np.ascontiguousarray(raw)


def _row_hashes(raw):
    """A 64-bit hash per row: a random-multiplier sum of its 8-byte words, then a final mix."""
    words = raw.view(np.uint64)
    multipliers = np.random.default_rng(0).integers(1, 2**63, size=words.shape[1],
                                                     dtype=np.uint64) | np.uint64(1)
    with np.errstate(over="ignore"):
        hashes = words @ multipliers
        hashes ^= hashes >> np.uint64(31)
        hashes *= _MIX
        hashes ^= hashes >> np.uint64(29)
    return hashes


def _leakage_finding(leaked, test_rows):
    if not leaked:
        return []
    test_index = np.array([t for t, _ in leaked])
    train_index = np.array([r for _, r in leaked])
    return [Finding("DATA_LEAKAGE", "warning", "data",
                    f"{len(leaked)} of {test_rows} test rows ({len(leaked) / test_rows:.1%}) also "
                    f"appear in the training set (e.g. test rows {_examples(test_index)} = train "
                    f"rows {_examples(train_index)})",
                    "deduplicate before splitting, or split by source (patient, user, file)",
                    {"duplicates": len(leaked), "fraction": len(leaked) / test_rows,
                     "example_test_rows": test_index[:EXAMPLES],
                     "example_train_rows": train_index[:EXAMPLES]})]


# ------------------------------------------------------------------ labels
def _class_counts(y):
    """``{class: count}`` for class labels (integers, booleans, integral floats, one-hot rows)."""
    if y.ndim == 2 and y.shape[1] > 1 and np.isin(y, (0, 1)).all() and (y.sum(1) == 1).all():
        labels = np.argmax(y, axis=1)
    elif y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1):
        labels = y.reshape(-1)
        if labels.dtype.kind == "f" and not (np.isfinite(labels).all()
                                             and np.array_equal(labels, np.round(labels))):
            return None  # regression targets
    else:
        return None
    values, counts = np.unique(labels, return_counts=True)
    return {_label(v): int(c) for v, c in zip(values, counts)}


def _label(value):
    value = value.item()
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _sampler_balances(read, labels):
    """The training loader's weighted sampler draws the classes within IMBALANCE_RATIO of each
    other (a table balanced on purpose by its sampler), judged on the examples read."""
    weights = None if read is None else read.split.sample_weights
    if weights is None or len(read.split.indices) != len(labels):
        return False
    classes = _class_counts(labels)
    if classes is None or len(classes) < 2:
        return False
    drawn = weights[np.asarray(read.split.indices, dtype=np.int64)]
    flat = np.asarray(labels).reshape(len(labels), -1)
    keys = np.argmax(flat, axis=1) if flat.shape[1] > 1 else flat[:, 0]
    totals = [float(drawn[keys == value].sum()) for value in np.unique(keys)]
    return min(totals) > 0 and max(totals) / min(totals) <= IMBALANCE_RATIO


def _imbalance(classes):
    if len(classes) < 2:
        return []
    most = max(classes, key=classes.get)
    least = min(classes, key=classes.get)
    ratio = classes[most] / classes[least]
    if ratio <= IMBALANCE_RATIO:
        return []
    return [Finding("LABEL_IMBALANCE", "warning", "data",
                    f"class {most!r} has {classes[most]} examples, class {least!r} only "
                    f"{classes[least]} ({ratio:.1f}:1)",
                    "weight the loss by inverse class frequency or resample; judge by per-class "
                    "recall, not accuracy",
                    {"ratio": ratio, "largest": most, "smallest": least, "counts": classes})]


# ------------------------------------------------------------- normalisation
def _normalisation(x):
    """Per-feature (per channel for images) mean and std over the finite training values."""
    if x.dtype.kind == "b":
        return []
    if x.dtype.kind in "iu" and x.dtype != np.uint8:   # uint8: pixels, judged below
        return [Finding(
            "UNNORMALIZED_INPUT", "info", "data",
            f"the inputs are integers ({x.dtype}, values {x.min()} to {x.max()}): read as ids "
            f"or categories (an embedding's input), not as features to standardise; not "
            f"checked for scale",
            "nothing to do for token ids or category codes; if these are measurements, "
            "convert them to float and standardise them",
            {"dtype": str(x.dtype), "min": x.min(), "max": x.max()})]
    mean, std, single_valued = _feature_stats(_feature_matrix(x))
    known = np.isfinite(mean) & np.isfinite(std)
    constant = np.flatnonzero(known & single_valued)
    varying = known & ~single_valued
    scaled = (np.abs(mean) > MEAN_LIMIT) | (std > STD_LIMITS[1])
    # A few near-constant features (the border pixels of digits scaled to [0, 1]) are harmless;
    # tiny spreads are a scale problem only when they are the typical feature's.
    tiny = std < STD_LIMITS[0]
    if not varying.any() or np.median(std[varying]) >= STD_LIMITS[0]:
        tiny = np.zeros_like(tiny)
    off = np.flatnonzero(varying & (scaled | tiny))
    findings = []
    if len(off):
        worst = off[np.argsort(-np.abs(mean[off]) - std[off])]
        findings.append(Finding(
            "UNNORMALIZED_INPUT", "warning", "data",
            f"{len(off)} of {len(mean)} {_feature_word(x)}s are far from zero mean and unit "
            f"variance (over those: means {mean[off].min():.3g} to {mean[off].max():.3g}, "
            f"stds {std[off].min():.3g} to {std[off].max():.3g}; e.g. "
            f"{_feature_word(x)}s {_examples(worst)})",
            "standardise with the training set's per-feature mean and std (the same numbers "
            "for validation and test)",
            {"features": len(off), "of": len(mean), "example_features": worst[:EXAMPLES],
             "example_means": mean[worst[:EXAMPLES]], "example_stds": std[worst[:EXAMPLES]]}))
    if len(constant):
        findings.append(Finding(
            "UNNORMALIZED_INPUT", "info", "data",
            f"{len(constant)} of {len(mean)} {_feature_word(x)}s are constant (e.g. "
            f"{_feature_word(x)}s {_examples(constant)}): they carry no information, and "
            f"standardising them divides by zero",
            "drop them, or add an epsilon to the std when standardising",
            {"constant_features": len(constant), "example_features": constant[:EXAMPLES]}))
    return findings


def _feature_matrix(x):
    """Rows x features; for inputs with 3 or more axes (N, C, ...), one feature per channel."""
    if x.ndim == 1:
        return x.reshape(-1, 1)
    if x.ndim == 2:
        return x
    return np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _feature_stats(features):
    """Per-column mean, std (float64) and whether the column holds one value, over finite values.

    "Constant" compares each column's extremes: a std computed from a value like 0.1 that
    float64 cannot hold exactly comes out near 1e-16, not 0.
    """
    if features.dtype.kind != "f" or np.isfinite(features).all():
        return (features.mean(axis=0, dtype=np.float64), features.std(axis=0, dtype=np.float64),
                features.max(axis=0) == features.min(axis=0))
    values = np.where(np.isfinite(features), features.astype(np.float64), np.nan)
    with np.errstate(all="ignore"), _quiet_empty_slices():
        return (np.nanmean(values, axis=0), np.nanstd(values, axis=0),
                np.nanmax(values, axis=0) == np.nanmin(values, axis=0))


def _feature_word(x):
    return "channel" if x.ndim >= 3 else "feature"


def _examples(indices):
    shown = ", ".join(str(int(i)) for i in indices[:EXAMPLES])
    return shown + (", ..." if len(indices) > EXAMPLES else "")


@contextmanager
def _quiet_empty_slices():
    """Columns with no finite value give NaN statistics; the NaN finding already reports them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield
