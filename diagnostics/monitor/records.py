"""What one sampled iteration measured, on the host: plain numbers and small NumPy arrays."""
import math
from dataclasses import dataclass, field

import numpy as np


class cached_property:   # named as the functools one it stands in for
    """``functools.cached_property`` without its lock: before Python 3.12 it takes a lock at
    every first read, which a sampled step pays for each of its records."""

    def __init__(self, func):
        self.func, self.name, self.__doc__ = func, func.__name__, func.__doc__

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.func(instance)
        return value


@dataclass
class ActivationRecord:
    """Sums over a tensor's elements and, per unit (axis 1), the largest and smallest value."""

    count: int
    total: float
    squares: float
    nonzero: float
    saturated: float
    unit_max: np.ndarray
    unit_min: np.ndarray

    @classmethod
    def from_parts(cls, count, parts, *, zeros=True):
        """From ``activation_statistics``'s results: sums, unit extremes, saturated count
        (``zeros=False``: ``input_statistics``'s, without the nonzero count, which is then
        NaN)."""
        if not zeros:
            total, squares, unit_max, unit_min = parts
            return cls(count, total, squares, math.nan, 0.0, unit_max, unit_min)
        total, squares, nonzero, unit_max, unit_min = parts[:5]
        saturated = parts[5] if len(parts) > 5 else 0.0
        return cls(count, total, squares, nonzero, saturated, unit_max, unit_min)

    def merge(self, other):
        """Fold in another call of the same module in the same iteration."""
        same_units = self.unit_max.shape == other.unit_max.shape
        return ActivationRecord(
            self.count + other.count, self.total + other.total, self.squares + other.squares,
            self.nonzero + other.nonzero, self.saturated + other.saturated,
            np.maximum(self.unit_max, other.unit_max) if same_units else self.unit_max,
            np.minimum(self.unit_min, other.unit_min) if same_units else self.unit_min)

    @property
    def units(self):
        return self.unit_max.size

    @property
    def examples(self):
        """How many values each unit saw (batch size times spatial positions)."""
        return self.count // max(self.units, 1)

    @property
    def mean(self):
        return self.total / self.count

    @property
    def rms(self):
        return math.sqrt(max(self.squares / self.count, 0.0))

    @property
    def std(self):
        return math.sqrt(max(self.squares / self.count - self.mean ** 2, 0.0))

    @cached_property
    def minimum(self):
        return float(self.unit_min.min())

    @cached_property
    def maximum(self):
        return float(self.unit_max.max())

    @property
    def zero_fraction(self):
        return 1.0 - self.nonzero / self.count

    @property
    def saturated_fraction(self):
        return self.saturated / self.count

    @property
    def finite(self):
        return math.isfinite(self.total) and math.isfinite(self.squares)

    @property
    def silent(self):
        """Every value exactly 0."""
        return self.nonzero == 0

    @cached_property
    def relative_spread(self):
        """The largest range of a unit over the examples, relative to the largest magnitude."""
        scale = max(abs(self.maximum), abs(self.minimum))
        if scale == 0:
            return 0.0
        with np.errstate(invalid="ignore"):   # inf - inf: no evidence either way
            return float(np.max(self.unit_max - self.unit_min)) / scale


@dataclass
class GradientRecord:
    """The gradient that the first backward pass of an iteration brought to one parameter."""

    count: int
    squares: float
    abs_total: float
    abs_max: float
    row_max: np.ndarray | None = None   # per output unit (a weight's row, a bias's entry)

    @classmethod
    def from_parts(cls, count, parts):
        squares, abs_total, largest = parts
        if not isinstance(largest, np.ndarray):
            largest = np.asarray(largest)
        if largest.ndim == 0:
            return cls(count, squares, abs_total, float(largest))
        abs_max = float(largest.max()) if largest.size else 0.0
        return cls(count, squares, abs_total, abs_max, largest)

    @property
    def norm_squared(self):
        """The sum of squares, on the host in float64. When the device's float32 sum overflowed
        although every element is finite (a huge loss scale), the bound
        ``max|g| * sum|g| >= sum g**2`` stands in for it: large, but never inf or NaN."""
        if math.isfinite(self.squares) or not self.finite:
            return self.squares if self.squares >= 0 else math.nan
        if math.isfinite(self.abs_total):
            return self.abs_max * self.abs_total
        return self.abs_max * self.abs_max * self.count

    @property
    def norm(self):
        return math.sqrt(self.norm_squared) if self.norm_squared >= 0 else math.nan

    @property
    def rms(self):
        return self.norm / math.sqrt(max(self.count, 1))

    @property
    def abs_mean(self):
        return self.abs_total / max(self.count, 1)

    @property
    def finite(self):
        """No element is NaN or inf (the largest |g| is finite: a NaN or inf would be it)."""
        return math.isfinite(self.abs_max)


@dataclass
class UpdateRecord:
    """What the optimizer did to one parameter: |Δw| and |w| after the step."""

    delta_norm: float
    weight_norm: float

    @property
    def ratio(self):
        if self.weight_norm > 0:
            return self.delta_norm / self.weight_norm
        return 0.0 if self.delta_norm == 0 else math.inf


@dataclass
class Sample:
    """Everything measured on one sampled iteration."""

    step: int
    loss: float = math.nan
    inputs: ActivationRecord | None = None
    output_width: int | None = None                    # the model output's last axis
    loss_classes: int | None = None    # the class axis (dim 1) of a class loss's input
    batch: int | None = None                           # the model input's first dimension
    output_entropy: float | None = None                # mean entropy of the output's softmax
    activations: dict = field(default_factory=dict)   # layer name -> ActivationRecord
    gradients: dict = field(default_factory=dict)     # parameter name -> GradientRecord
    stale: dict = field(default_factory=dict)         # parameter name -> GradientRecord left over
    stale_cleared: set = field(default_factory=set)   # names whose held .grad a later zero_grad
                                                      # emptied before another backward
    cut_from_loss: str | None = None   # no parameter got a gradient though the loss has a
                                       # graph: "backward ran" (its buffers are freed), "no
                                       # backward" (still held) or "unknown"
    updates: dict = field(default_factory=dict)       # parameter name -> UpdateRecord
    sampled_gradients: dict = field(default_factory=dict)  # parameter name -> largest |entry|
                            # of its gradient on the entries its update is measured on
                            # (parameters larger than that sample only: a sparse gradient may
                            # miss them all)
    loss_scaled: bool = False          # the backward ran on a scaled loss (GradScaler, or fp16
                                       # autocast seen)
    loss_scale: float | None = None    # the GradScaler's scale, divided out of the gradients

    @cached_property
    def gradient_norm(self):
        """Norm of all parameters' gradients together (read once the sample is complete),
        summed in float64 from each parameter's own sum."""
        if not self.gradients:
            return math.nan
        return math.sqrt(sum(g.norm_squared for g in self.gradients.values()))

    @property
    def skipped(self):
        """A loss-scaled step whose gradients hold inf or NaN: the GradScaler skips it (no
        optimizer step) and lowers its scale, the normal way it finds its scale."""
        return self.loss_scaled and any(not g.finite for g in self.gradients.values())

    @property
    def scale_unknown(self):
        """Gradients of a scaled loss whose scale the Monitor was not given: their size means
        nothing on its own."""
        return self.loss_scaled and self.loss_scale is None

    def add_activation(self, name, record):
        previous = self.activations.get(name)
        self.activations[name] = record if previous is None else previous.merge(record)
