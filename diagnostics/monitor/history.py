"""``History``: the loss of every step and a row of statistics per sampled step, compactly."""
import math
import statistics
from array import array

import numpy as np

from .kinds import SATURATION
from .layout import display_name

ACTIVATION_STATS = ("mean", "std", "min", "max", "zeros", "dead")
LEVEL_STEPS = 24   # the loss level is the median of this many consecutive steps (even, and
                   # a multiple of 2, 3 and 4: a loss swinging with such a period has no
                   # falsely low level)
GRADIENT_STATS = ("norm", "abs_mean", "max")


def activation_columns(layer):
    stats = ACTIVATION_STATS + (("saturated",) if layer.kind in SATURATION else ())
    return tuple(f"activation/{display_name(layer.name)}/{stat}" for stat in stats)


def gradient_columns(param):
    return tuple(f"gradient/{param.name}/{stat}" for stat in GRADIENT_STATS)


def update_column(param):
    return f"update/{param.name}/ratio"


def columns_for(layout, *, learning_rate=False):
    """The row columns, fixed by the model's structure so that every row has the same ones;
    ``lr`` (the first parameter group's) when there is an optimizer."""
    columns = ["step", "loss", "gradient_norm"] + (["lr"] if learning_rate else [])
    columns += ["input/mean", "input/std", "input/min", "input/max"]
    for layer in layout.layers:
        columns += activation_columns(layer)
    for param in layout.trainable:
        columns += gradient_columns(param) + (update_column(param),)
    return columns


class Series:
    """A growing float64 array: ``append`` in amortised O(1), ``values`` without a copy."""

    def __init__(self):
        self._buffer = np.empty(256)
        self._size = 0

    def append(self, value):
        if not isinstance(value, (float, int)) or self._size == self._buffer.size:
            self.extend((value,))
            return
        self._buffer[self._size] = value   # a number: no array made for it
        self._size += 1

    def extend(self, values):
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        end = self._size + values.size
        if end > self._buffer.size:
            grown = np.empty(max(2 * self._buffer.size, end))
            grown[:self._size] = self._buffer[:self._size]
            self._buffer = grown
        self._buffer[self._size:end] = values
        self._size = end

    def __len__(self):
        return self._size

    @property
    def values(self):
        """The values so far (a read-only view: appending later does not change it)."""
        view = self._buffer[:self._size]
        view.flags.writeable = False
        return view


class History:
    """Losses per step (``losses``) and rows per sampled step (``rows``, ``column(name)``)."""

    def __init__(self, columns):
        self.columns = tuple(columns)
        self._index = {name: i for i, name in enumerate(self.columns)}
        self._losses = Series()
        self._values = array("d")
        self.first_nonfinite_step = None
        self.best_level = None        # the lowest median of LEVEL_STEPS consecutive losses
        self._level = []              # losses not yet in a median of LEVEL_STEPS

    # ------------------------------------------------------------------ losses
    def add_losses(self, values):
        """Append the losses of consecutive steps, oldest first."""
        if len(values) == 1 and isinstance(values[0], float):   # every step of every=1
            self._add_loss(values[0])
            return
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        if self.first_nonfinite_step is None and not np.isfinite(values).all():
            bad = np.flatnonzero(~np.isfinite(values))
            self.first_nonfinite_step = len(self._losses) + int(bad[0])
        self._losses.extend(values)
        self._level += values.tolist()
        complete = len(self._level) - len(self._level) % LEVEL_STEPS
        if complete:
            levels = np.median(np.reshape(self._level[:complete], (-1, LEVEL_STEPS)), axis=1)
            levels = levels[np.isfinite(levels)]
            if levels.size and (self.best_level is None or levels.min() < self.best_level):
                self.best_level = float(levels.min())
            del self._level[:complete]

    def _add_loss(self, value):
        """``add_losses([value])`` without NumPy: what a step of ``every=1`` costs."""
        if self.first_nonfinite_step is None and not math.isfinite(value):
            self.first_nonfinite_step = len(self._losses)
        self._losses.append(value)
        self._level.append(value)
        if len(self._level) == LEVEL_STEPS:
            nan = any(v != v for v in self._level)   # as np.median: NaN in, NaN out
            level = math.nan if nan else statistics.median(self._level)
            if math.isfinite(level) and (self.best_level is None or level < self.best_level):
                self.best_level = float(level)
            self._level = []

    @property
    def losses(self):
        return self._losses.values

    @property
    def steps(self):
        return len(self._losses)

    # -------------------------------------------------------------------- rows
    def add_row(self, row):
        """Append a row given as {column: value}; missing columns are NaN."""
        values = [np.nan] * len(self.columns)
        index = self._index
        for name, value in row.items():
            values[index[name]] = float(value)
        self._values.extend(values)

    def __len__(self):
        return len(self._values) // len(self.columns)

    def table(self):
        """All rows as a 2-D float64 array, one column per entry of ``columns``."""
        table = np.array(self._values, dtype=np.float64)
        return table.reshape(len(self), len(self.columns))

    def column(self, name):
        return self.table()[:, self._index[name]]

    @property
    def rows(self):
        return [dict(zip(self.columns, values.tolist())) for values in self.table()]

    def to_dict(self):
        return {"losses": self.losses.tolist(), "columns": list(self.columns),
                "rows": self.table().tolist()}
