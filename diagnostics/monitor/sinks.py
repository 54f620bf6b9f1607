"""Sinks: where the Monitor writes one row per sampled step (CSV, JSON lines, TensorBoard, W&B).

A sink gets ``open(columns)`` once (the columns never change during a run), then
``write(row, histograms)`` for each sampled step, and ``close()`` when the Monitor closes.
``row`` maps column names to numbers (NaN where a value is missing); ``histograms`` maps
names to NumPy arrays of weights and gradients, and is only built for sinks that set
``wants_histograms``. A sink with a ``write_finding(finding)`` method also gets each finding
when it is found (or its severity rises) and again when it is resolved (``finding.resolved``).
"""
import csv
import json
import math
from pathlib import Path

from ..errors import DiagnosticsError, require


class Sink:
    """Base class: keeps the columns; subclasses write rows."""

    wants_histograms = False

    def open(self, columns):
        self.columns = tuple(columns)

    def write(self, row, histograms=None):
        raise NotImplementedError(f"{type(self).__name__} must define write(row, histograms)")

    def close(self):
        """Flush and release what the sink holds; idempotent."""


class CSVSink(Sink):
    """One CSV row per sampled step under a header of every column; empty cells where a value
    is missing. Flushed after each row, so the file survives a crash."""

    def __init__(self, path):
        self.path = _writable_path(path, "CSVSink(path)")
        self._file = self._writer = None

    def open(self, columns):
        super().open(columns)
        self._file = self.path.open("w", newline="", encoding="utf-8")
        self._writer = csv.writer(self._file)
        self._writer.writerow(self.columns)

    def write(self, row, histograms=None):
        self._writer.writerow([_cell(column, row.get(column)) for column in self.columns])
        self._file.flush()

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None


class JSONLSink(Sink):
    """One JSON object per line and per sampled step, with every column as a key (null where a
    value is missing or not finite); and one line per finding transition, told apart by its
    ``"event"`` key: ``"found"`` or ``"resolved"``, with the finding's fields (``to_dict``)."""

    def __init__(self, path):
        self.path = _writable_path(path, "JSONLSink(path)")
        self._file = None

    def open(self, columns):
        super().open(columns)
        self._file = self.path.open("w", encoding="utf-8")

    def write(self, row, histograms=None):
        record = {column: _number(column, row.get(column)) for column in self.columns}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def write_finding(self, finding):
        event = "resolved" if finding.resolved else "found"
        self._file.write(json.dumps({"event": event, **finding.to_dict()}) + "\n")
        self._file.flush()

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None


class TensorBoardSink(Sink):
    """Scalars for every column (grouped by their first name part: ``loss``, ``activation/``,
    ``gradient/``, ...) and histograms of weights and gradients, through
    ``torch.utils.tensorboard``. Give a ``log_dir`` or a ``SummaryWriter`` of your own."""

    def __init__(self, log_dir=None, *, writer=None, histograms=True):
        require(log_dir is not None or writer is not None, "TensorBoardSink",
                "a log_dir or a SummaryWriter", "neither")
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as error:
            raise DiagnosticsError(
                f"TensorBoardSink: expected torch and tensorboard to be installed "
                f"(pip install 'gradhunt[tensorboard]'); importing them failed with {error!r}"
            ) from error
        self._owns_writer = writer is None
        self.writer = writer if writer is not None else SummaryWriter(log_dir=str(log_dir))
        self.wants_histograms = bool(histograms)

    def write(self, row, histograms=None):
        step = int(row["step"])
        for column in self.columns:
            value = row.get(column)
            if column != "step" and value is not None and math.isfinite(value):
                self.writer.add_scalar(column, value, global_step=step)
        for name, values in (histograms or {}).items():
            if values.size and all(math.isfinite(v) for v in (values.min(), values.max())):
                self.writer.add_histogram(name, values, global_step=step)

    def close(self):
        if self.writer is not None:
            self.writer.flush()
            if self._owns_writer:
                self.writer.close()
            self.writer = None


class WandbSink(Sink):
    """Rows (and weight/gradient histograms) logged to Weights & Biases. Pass a ``run`` of your
    own, or keyword arguments for ``wandb.init`` (e.g. ``project=..., mode="offline"``)."""

    def __init__(self, run=None, *, histograms=False, **init_options):
        try:
            import wandb
        except ImportError as error:
            raise DiagnosticsError(
                "WandbSink: expected the wandb package to be installed (pip install "
                f"'gradhunt[wandb]'); importing it failed with {error!r}") from error
        self._wandb = wandb
        self._owns_run = run is None
        self._init_options = init_options
        self.run = run
        self.wants_histograms = bool(histograms)

    def open(self, columns):
        super().open(columns)
        if self.run is None:
            self.run = self._wandb.init(**self._init_options)

    def write(self, row, histograms=None):
        values = {column: row[column] for column in self.columns
                  if column != "step" and column in row and math.isfinite(row[column])}
        for name, array in (histograms or {}).items():
            values[name] = self._wandb.Histogram(array)
        self.run.log(values, step=int(row["step"]), commit=True)

    def close(self):
        if self.run is not None and self._owns_run:
            self.run.finish()
        self.run = None


def _writable_path(path, argument):
    require(isinstance(path, (str, Path)), argument, "a file path (str or pathlib.Path)",
            type(path).__name__)
    path = Path(path)
    require(path.parent.is_dir(), argument, "a file in an existing directory",
            f"{str(path)!r} (no directory {str(path.parent)!r})")
    return path


def _number(column, value):
    """The value for a file: None when missing or not finite, an int for the step."""
    if value is None or not math.isfinite(value):
        return None
    return int(value) if column == "step" else float(value)


def _cell(column, value):
    number = _number(column, value)
    return "" if number is None else repr(number)
