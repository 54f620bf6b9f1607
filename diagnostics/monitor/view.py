"""``WindowView``: the read-only picture of the recent past that every check looks at."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from .kinds import RECTIFIER
from .records import cached_property

if TYPE_CHECKING:   # for the hints alone
    from .layout import Layout
    from .probes.base import Signal
    from .records import Sample
    from .settings import Thresholds
    from .units import UnitActivity

S = TypeVar("S")

_CLIP_HISTORY = 10_000  # the clip value is taken from at most this many recent gradient norms


@dataclass(frozen=True)
class LossLevels:
    """The first finite loss (``initial``), and medians: ``start`` of the first quarter-window,
    ``then`` and ``now`` of the first and last quarter of the ``recent`` finite losses."""

    initial: float
    start: float
    then: float
    now: float
    recent: np.ndarray
    beyond_start: bool       # the recent window starts after the first quarter-window

    @property
    def steps(self):
        return int(self.recent.size)


@dataclass
class WindowView:
    """The last ``window`` sampled steps, the loss of every step, and what the Monitor knows.

    Who fills what: the Monitor gives ``step``, ``every``, ``samples`` (every probe writes its
    part of a ``Sample``), ``layout`` and ``thresholds``; the probes' ``view_fields`` give
    ``losses``, ``first_nonfinite_step`` and ``best_loss_level`` (``LossProbe``),
    ``learning_rates`` (``LearningRateProbe``), ``gradient_norms`` and ``gradient_rows``
    (``GradientsProbe``), ``units`` (``ActivationsProbe``), ``eval_passes`` and
    ``eval_pass_count`` (``ModesProbe``), ``kept_losses`` and ``held_graphs``
    (``GraphProbe``). Everything else a probe publishes is a typed ``Signal`` in ``signals``,
    read with ``signal(Kind)``.
    """

    step: int                      # steps completed so far
    every: int
    samples: list[Sample]          # oldest first
    losses: np.ndarray             # one per completed step
    layout: Layout | None
    thresholds: Thresholds
    learning_rates: list[float] = field(default_factory=list)
    gradient_norms: np.ndarray = field(default_factory=lambda: np.zeros(0))  # sampled steps
    first_nonfinite_step: int | None = None
    best_loss_level: float | None = None          # lowest median of 24 consecutive losses
    eval_passes: list = field(default_factory=list)   # the first (step, [modules in train mode])
    eval_pass_count: int = 0                           # passes without gradients in train mode
    kept_losses: list = field(default_factory=list)   # (step, graph buffers alive) of held losses
    held_graphs: list = field(default_factory=list)   # (step, steps later) of loss graphs alive
    units: UnitActivity | None = None                  # of the window's activations
    gradient_rows: UnitActivity | None = None          # of weight-gradient rows
    signals: tuple[Signal, ...] = ()                   # the probes' values, one per kind

    def __post_init__(self) -> None:
        by_kind = {}
        for value in self.signals:
            kind = type(value)
            if kind in by_kind:
                raise ValueError(f"two values of the signal {kind.__name__} in one view")
            by_kind[kind] = value
        self._signals = by_kind

    def signal(self, kind: type[S]) -> S | None:
        """The value of the signal ``kind`` (a ``probes.base.Signal`` dataclass), or None when
        no probe published it: a check reads what it needs so, and stays quiet without it."""
        return self._signals.get(kind)

    # ------------------------------------------------------------------- loss
    @cached_property
    def loss_levels(self):
        """Medians of the loss at the start and in the recent window; None when too few."""
        thresholds = self.thresholds
        size = thresholds.loss_window_steps(self.losses.size)
        recent = self.losses[-size:]
        recent = recent[np.isfinite(recent)]
        if recent.size < size:
            return None
        quarter = max(size // 4, 2)
        head = self.losses[:quarter]
        head = head[np.isfinite(head)]
        if head.size == 0:
            return None
        return LossLevels(
            initial=float(head[0]), start=float(np.median(head)),
            then=float(np.median(recent[:quarter])), now=float(np.median(recent[-quarter:])),
            recent=recent,
            beyond_start=self.losses.size >= size + quarter)

    @cached_property
    def output_width(self):
        """The number of classes: the class axis of a class loss's input where one was seen
        (dim 1: (N, C, H, W) logits have C classes, not W), else the model output's last
        dimension."""
        return next((s.loss_classes or s.output_width for s in reversed(self.samples)
                     if s.loss_classes or s.output_width), None)

    @property
    def chance_loss(self):
        """-log(1/C), the cross-entropy of a uniform guess, when the output has C >= 2 columns."""
        width = self.output_width
        return math.log(width) if width and width >= 2 else None

    @cached_property
    def prediction_entropy(self):
        """Median over the recent samples of the output's mean softmax entropy (ln C when the
        model guesses uniformly); None when none was measured."""
        values = [s.output_entropy for s in self.recent
                  if s.output_entropy is not None and math.isfinite(s.output_entropy)
                  and (s.loss_classes is None or s.loss_classes == s.output_width)]
        return statistics.median(values) if values else None

    @property
    def learning_rate(self):
        return self.learning_rates[0] if self.learning_rates else None

    # ------------------------------------------------------------ activations
    @property
    def recent(self):
        """The last ``recent_samples`` samples: what checks of a current state look at."""
        return self.samples[-self.thresholds.recent_samples:]

    def activations(self, layer_name):
        """The layer's records in the recent samples, oldest first."""
        return self._activations_by_layer.get(layer_name, [])

    @cached_property
    def _activations_by_layer(self):
        by_layer = {}
        for sample in self.recent:
            for name, record in sample.activations.items():
                by_layer.setdefault(name, []).append(record)
        return by_layer

    def dead_units(self, layer_name):
        """Boolean array: units whose output was exactly 0 on every value of the last
        ``dead_samples`` sampled steps; None before they hold ``dead_min_samples`` steps and
        ``dead_min_examples`` values per unit."""
        if self.units is None:
            return None
        return self.units.dead(layer_name, min_examples=self.thresholds.dead_min_examples,
                               min_samples=self.thresholds.dead_min_samples)

    def units_without_gradient(self, param_name):
        """Boolean array: rows of the weight (its layer's output units) whose gradient was
        exactly 0 in each of the last ``dead_samples`` sampled steps that brought the weight a
        gradient; None until there is as much evidence as ``dead_units`` asks for."""
        if self.gradient_rows is None:
            return None
        return self.gradient_rows.dead(param_name,
                                       min_examples=self.thresholds.dead_min_examples,
                                       min_samples=self.thresholds.dead_min_samples)

    def dead_fraction(self, layer):
        if layer.kind != RECTIFIER:
            return math.nan
        dead = self.dead_units(layer.name)
        if dead is None or dead.size == 0:
            return math.nan
        return np.count_nonzero(dead) / dead.size

    # -------------------------------------------------------------- gradients
    @property
    def backward_samples(self):
        """Samples whose iteration ran a backward pass, less the steps a GradScaler skipped
        (their inf/NaN gradients are how it finds its scale; ``Sample.skipped``)."""
        return [s for s in self.samples if s.gradients and not s.skipped]

    def gradient_rms(self, param_name):
        """Median RMS of a parameter's gradient in the recent samples; None without one."""
        return self._gradient_rms.get(param_name)

    @property
    def gradient_rms_by_name(self):
        """{parameter name: median gradient RMS in the recent samples}."""
        return self._gradient_rms

    @cached_property
    def _gradient_rms(self):
        values = {}
        for sample in self.recent:
            if sample.skipped:
                continue
            for name, record in sample.gradients.items():
                values.setdefault(name, []).append(record.rms)
        return {name: statistics.median(rms) for name, rms in values.items()}

    def calm_gradient_norms(self):
        """The finite, non-zero gradient norms below the exploding threshold, most recent
        ``_CLIP_HISTORY`` sampled steps: what a clip value is taken from."""
        norms = self.gradient_norms[-_CLIP_HISTORY:]
        norms = norms[np.isfinite(norms)]
        return norms[(norms > 0) & (norms < self.thresholds.gradient_norm)]

    def clip_value(self):
        """AutoClip's rule: a low percentile of the calm gradient norms seen so far; None when
        fewer than three exist."""
        norms = self.calm_gradient_norms()
        if norms.size < 3:
            return None
        return float(np.percentile(norms, self.thresholds.clip_percentile))
