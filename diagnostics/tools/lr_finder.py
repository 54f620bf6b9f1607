"""``find_lr``: the learning-rate range test, with the model, optimizer and RNG restored afterwards.

The learning rate grows each step from ``start_lr`` to ``end_lr`` while the model trains; the
loss (exponentially smoothed, bias corrected) is recorded until it exceeds ``diverge`` times
its best value. Three readings of the curve are offered:

- ``steepest``: where the smoothed loss falls fastest against log(lr);
- ``valley``: fastai's valley, a point half-way into the longest falling stretch of the curve
  (``start + len/3 + len/6`` of its longest decreasing subsequence), well before the bottom;
- ``minimum/10``: a tenth of the learning rate at the lowest loss.

The smoothed curve lags the raw loss (a 0.98 average remembers about 50 steps), so its lowest
point sits where the raw loss already climbs; the /10 is calibrated with that lag. Read on a
zero-lag (centred) smoothing instead, minimum/10 trained 3.8-9.9x worse than the best
hand-tuned rate in ``benchmarks/lr_finder_advice.py``, against 0.25-0.84x as it is.
"""
import csv
import math
from dataclasses import dataclass, field

import numpy as np

from ..backends import get_backend
from ..batch import Batch
from ..errors import DiagnosticsError, require
from ..findings import Finding
from ..jsonable import to_jsonable
from ..progress import progress_bar
from . import _training as T

METHODS = ("minimum/10", "steepest", "valley")
DEFAULT_METHOD = "minimum/10"


@dataclass
class LRFinderResult:
    """The sweep (``lrs``, smoothed ``losses``, ``raw_losses``) and what it suggests.

    ``suggestion`` is ``suggestions[method]``; a value is None when the curve is too short to
    read. ``diverged_at`` is the learning rate at which the loss passed the divergence limit.
    """

    lrs: list
    losses: list
    raw_losses: list
    suggestions: dict
    method: str
    diverged_at: float | None
    findings: list = field(default_factory=list)
    error: str | None = None

    @property
    def suggestion(self):
        return self.suggestions.get(self.method)

    @property
    def passed(self):
        """The sweep ran (no exception in the user's code) and suggests a learning rate."""
        return self.error is None and self.suggestion is not None

    def to_dict(self):
        return to_jsonable({"lrs": self.lrs, "losses": self.losses, "raw_losses": self.raw_losses,
                            "suggestion": self.suggestion, "suggestions": self.suggestions,
                            "method": self.method, "diverged_at": self.diverged_at,
                            "error": self.error,
                            "findings": [finding.to_dict() for finding in self.findings]})

    def to_csv(self, path):
        """Write ``lr, loss, raw_loss`` rows to ``path``."""
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["lr", "loss", "raw_loss"])
            writer.writerows(zip(self.lrs, self.losses, self.raw_losses))

    def plot(self, path):
        """Save the smoothed loss against the learning rate (log axis), suggestions marked."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        figure = Figure(figsize=(7, 4.5))
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        axes.plot(self.lrs, self.raw_losses, color="0.8", linewidth=1, label="loss")
        axes.plot(self.lrs, self.losses, color="C0", linewidth=2, label="smoothed loss")
        for number, (name, lr) in enumerate(self.suggestions.items()):
            if lr is None:
                continue
            loss = float(np.interp(np.log(lr), np.log(self.lrs), self.losses))
            marker = "*" if name == self.method else "o"
            axes.plot([lr], [loss], marker, color=f"C{number + 1}", markersize=12 if marker == "*"
                      else 8, label=f"{name}: {lr:.2g}" + (" (suggestion)" if name == self.method
                                                           else ""))
            axes.axvline(lr, color=f"C{number + 1}", linestyle=":", linewidth=1)
        axes.set_xscale("log")
        axes.set_xlabel("learning rate")
        axes.set_ylabel("loss")
        axes.set_title("learning-rate range test")
        finite = [v for v in self.losses if math.isfinite(v)]
        if finite:
            low, high = min(finite), max(finite[: max(1, len(finite) // 2)] + [finite[0]])
            axes.set_ylim(low - 0.05 * (high - low + 1e-12), high + 0.25 * (high - low + 1e-12))
        axes.legend(loc="upper left")
        axes.grid(True, alpha=0.3)
        figure.tight_layout()
        figure.savefig(path, dpi=100)

    def __str__(self):
        head = (f"LR range test: {len(self.lrs)} steps, lr {self.lrs[0]:.2g} -> "
                f"{self.lrs[-1]:.2g}" if self.lrs else "LR range test: no steps")
        if self.diverged_at is not None:
            head += f", loss diverged at lr {self.diverged_at:.2g}"
        lines = [head]
        if self.error is not None:
            lines.append(f"  FAILED: {self.error}")
        edge = any(finding.code == "LR_SWEEP_EDGE" for finding in self.findings)
        lines.append(f"  suggestion ({self.method}): " + _lr_text(self.suggestion)
                     + (" (not known to be safe: the lowest loss sits at an end of the sweep, "
                        "see LR_SWEEP_EDGE below)" if edge and self.suggestion is not None
                        else ""))
        lines.extend(f"    {name:<11} {_lr_text(lr)}" for name, lr in self.suggestions.items())
        if self.losses:
            skip = _warm_up(self.losses) if len(self.losses) >= 5 else 0
            after = np.asarray(self.losses[skip:], dtype=float)
            best = skip + (int(np.nanargmin(after)) if np.isfinite(after).any() else 0)
            lines.append(f"  lowest smoothed loss {self.losses[best]:.4g} at lr "
                         f"{self.lrs[best]:.2g}" + (f" (after the first {skip} steps)"
                                                    if skip else ""))
        lines.extend(f"  {line}" for finding in self.findings for line in str(finding).splitlines())
        return "\n".join(lines)


def find_lr(model, loss_fn, data, *, optimizer=None, start_lr=1e-7, end_lr=10.0, steps=100,
            mode="exp", smooth=0.98, diverge=4.0, progress="auto"):
    """Sweep the learning rate from ``start_lr`` to ``end_lr`` over ``steps`` training steps.

    ``data`` is an ``(inputs, targets)`` pair (inputs: a tensor, a tuple of positional inputs or
    a dict of keyword inputs), or an iterable of such batches (a DataLoader),
    cycled as needed. ``optimizer`` defaults to Adam over the model's parameters; every param
    group's lr is set to the swept value. ``mode`` is ``"exp"`` or ``"linear"`` spacing;
    ``smooth`` the loss's exponential-smoothing factor; the sweep stops when the smoothed loss
    exceeds ``diverge`` times its best. ``progress``: True, False, or ``"auto"`` (a progress
    bar on stderr when it is a terminal and the sweep runs longer than two seconds). The model,
    the optimizer and the RNG states are restored afterwards, bit for bit.
    """
    backend = get_backend(model)
    T.check_parameters(backend)
    T.check_callable(loss_fn, "loss_fn")
    if optimizer is not None:
        T.check_optimizer(backend, optimizer)
    start_lr = T.check_float(start_lr, "start_lr", expected="a finite number > 0",
                             accept=lambda v: v > 0)
    end_lr = T.check_float(end_lr, "end_lr", expected=f"a finite number > start_lr={start_lr}",
                  accept=lambda v: v > start_lr)
    steps = T.check_int(steps, "steps", minimum=2)
    require(mode in ("exp", "linear"), "mode", "'exp' or 'linear'", repr(mode))
    T.check_float(smooth, "smooth", expected="a number in [0, 1)", accept=lambda v: 0 <= v < 1)
    T.check_float(diverge, "diverge", expected="a finite number > 1", accept=lambda v: v > 1)
    require(progress in (True, False, "auto"), "progress", "True, False or 'auto'",
            repr(progress))
    batches = _BatchSource(backend, loss_fn, data)
    lrs = _schedule(start_lr, end_lr, steps, mode)
    with backend.preserved(optimizer):
        sweep = _sweep(backend, loss_fn, batches, optimizer=optimizer, lrs=lrs, smooth=smooth,
                       diverge=diverge, progress=progress)
    return _result(*sweep, smooth=smooth, one_batch=batches.single is not None)


def _schedule(start_lr, end_lr, steps, mode):
    if mode == "exp":
        return list(np.geomspace(start_lr, end_lr, steps))
    return list(np.linspace(start_lr, end_lr, steps))


class _BatchSource:
    """Yields converted ``(inputs, targets)`` batches from a pair or from a re-iterable source."""

    def __init__(self, backend, loss_fn, data):
        self.backend, self.loss_fn = backend, loss_fn
        self.single = self._batch(data) if _looks_like_pair(backend, data) else None
        if self.single is None:
            require(hasattr(data, "__iter__") and not isinstance(data, (str, bytes, dict)),
                    "data", "an (inputs, targets) pair or an iterable of such batches",
                    type(data).__name__)
        self.data = data

    def __iter__(self):
        if self.single is not None:
            while True:
                yield self.single
        while True:
            empty = True
            for batch in self.data:
                empty = False
                require(isinstance(batch, (tuple, list)) and len(batch) >= 2, "data",
                        "batches that are (inputs, targets) pairs", type(batch).__name__)
                yield self._batch(batch)
            if empty:
                return

    def _batch(self, pair):
        return Batch.prepare(self.backend, self.loss_fn, pair[0], pair[1],
                             argument="data[0] (inputs)", target_argument="data[1] (targets)")


def _looks_like_pair(backend, data):
    """An ``(inputs, targets)`` pair: arrays or tensors, the inputs possibly a dict."""
    def array(value):
        return backend.is_tensor(value) or isinstance(value, np.ndarray)
    def inputs(value):    # one tensor, keyword inputs, or a tuple of positional inputs
        return (array(value) or isinstance(value, dict)
                or (isinstance(value, (tuple, list)) and len(value) > 0 and array(value[0])))
    return (isinstance(data, (tuple, list)) and len(data) == 2 and array(data[1])
            and inputs(data[0]))


def _sweep(backend, loss_fn, batches, *, optimizer, lrs, smooth, diverge, progress):
    optimizer = T.make_optimizer(backend, optimizer, lr=lrs[0])
    shown, raw, smoothed, average, best = [], [], [], 0.0, math.inf
    display = progress_bar(len(lrs), desc="find_lr", show=progress)
    diverged_at = error = None
    try:
        for step, (lr, batch) in enumerate(zip(lrs, batches)):
            T.set_lr(optimizer, lr)
            try:
                value, _ = T.train_step(backend, optimizer, batch)
            except DiagnosticsError:
                raise
            except Exception as exc:  # the user's model or loss: a failed sweep quoting it
                error = (f"the model's forward or backward, or loss_fn, raised "
                         f"{type(exc).__name__}: {_first_line(exc)} (at lr {lr:.2g})")
                break
            average = smooth * average + (1 - smooth) * value
            current = average / (1 - smooth ** (step + 1))
            shown.append(float(lr))
            raw.append(value)
            smoothed.append(current)
            display.set_postfix_str(f"lr {lr:.2e} loss {current:.4g}", refresh=False)
            display.update()
            if not math.isfinite(current) or current > diverge * best:
                diverged_at = float(lr)
                break
            best = min(best, current)
    finally:
        display.close()
    return shown, smoothed, raw, diverged_at, error


def _first_line(error):
    text = str(error).strip().splitlines()
    return text[0] if text else ""


def _result(lrs, losses, raw, diverged_at, error=None, *, smooth=0.98, one_batch=False):
    if error is not None:
        return LRFinderResult(lrs=lrs, losses=losses, raw_losses=raw,
                              suggestions={name: None for name in METHODS},
                              method=DEFAULT_METHOD, diverged_at=diverged_at, error=error)
    if not lrs:
        raise DiagnosticsError("data: expected at least one batch, got an empty iterable")
    usable = len(losses) - 1 if diverged_at is not None else len(losses)
    suggestions = _suggestions(np.array(lrs[:usable]), np.array(losses[:usable]))
    findings = _flat_curve(np.array(raw[:usable]), np.array(losses[:usable]), smooth)
    findings += _edge(np.array(lrs[:usable]), np.array(losses[:usable]), diverged_at,
                      suggestions, flat=bool(findings), one_batch=one_batch)
    if diverged_at is not None and usable < 5:
        findings.append(Finding(
            "LOSS_DIVERGING", "warning", "loss",
            f"the loss diverged after {usable + 1} steps, at lr {diverged_at:.2g}, too early to "
            f"read a suggestion", "lower start_lr", {"diverged_at": diverged_at}))
    return LRFinderResult(lrs=lrs, losses=losses, raw_losses=raw, suggestions=suggestions,
                          method=DEFAULT_METHOD, diverged_at=diverged_at, findings=findings)


def _suggestions(lrs, losses):
    if len(losses) < 5:
        return {name: None for name in METHODS}
    return {"minimum/10": _minimum_over_ten(lrs, losses),
            "steepest": _steepest(lrs, losses), "valley": _valley(lrs, losses)}


def _warm_up(losses):
    """The first steps, whose smoothed loss rests on a few batches: read no minimum there."""
    return max(1, len(losses) // 10)


def _minimum_over_ten(lrs, losses):
    """A tenth of the lr at the lowest smoothed loss after the smoothing's warm-up (on a flat
    curve an early lucky batch would otherwise be the minimum, and the advice a rate at the
    very start of the sweep)."""
    skip = _warm_up(losses)
    return float(lrs[skip + int(np.argmin(losses[skip:]))] / 10)


def _flat_curve(raw, losses, smooth):
    """A warning when the smoothed loss never fell below where the sweep began (the median
    loss of its first steps) by more than twice the noise of the two: every reading is then a
    guess. One batch's noise comes from the median step-to-step change; a median of n losses
    carries about 1.25 / sqrt(n) of it, an exponential average of ``smooth`` about
    sqrt((1 - smooth) / (1 + smooth))."""
    if len(losses) < 5:
        return []
    skip = _warm_up(losses)
    start, lowest = float(np.median(raw[:skip + 1])), float(np.min(losses[skip:]))
    per_batch = 1.4826 * float(np.median(np.abs(np.diff(raw)))) / math.sqrt(2)
    noise = per_batch * math.hypot(1.25 / math.sqrt(skip + 1),
                                   math.sqrt((1 - smooth) / (1 + smooth)))
    if not (math.isfinite(start) and math.isfinite(lowest)) or lowest < start - 2 * noise:
        return []
    return [Finding(
        "LOSS_PLATEAU", "warning", "loss",
        f"the loss did not fall during the sweep: from {start:.4g} at its start to at best "
        f"{lowest:.4g} (smoothed), within its noise (one batch's loss varies by about "
        f"{per_batch:.2g}): the suggestions are guesses",
        "sweep over more steps (steps=300) or larger batches, so that the loss has time to "
        "fall at the good rates; or start training at the valley reading and watch the loss",
        {"start_loss": start, "lowest_loss": lowest, "batch_noise": per_batch,
         "steps": int(len(losses))})]


def _edge(lrs, losses, diverged_at, suggestions, *, flat, one_batch):
    """A warning when the lowest smoothed loss (after the warm-up) is at an end of the range:
    the sweep did not bracket a minimum, so minimum/10 is a tenth of an end of the range, not
    of a measured bottom. At the top: the loss still falling at end_lr, the sweep never
    diverging (one batch, memorised faster as the rate grows, does that); a loss that goes
    from its lowest to diverging at the next rate is the usual abrupt blow-up, and a tenth of
    the rate below it the classic reading. At the bottom: the loss only rose from start_lr
    (on to diverging, or after a fall in the warm-up; a flat curve's lowest point is
    anywhere). ``one_batch``: the sweep read one (inputs, targets) batch,
    whose loss a model keeps lowering by memorising it, so the advice adds a loader."""
    if len(losses) < 5:
        return []
    loader = (" over many batches (find_lr(model, loss_fn, train_loader)): on one (inputs, "
              "targets) batch the loss keeps falling as the model memorises it"
              if one_batch else "")
    skip = _warm_up(losses)
    best = skip + int(np.argmin(losses[skip:]))
    reading = suggestions.get(DEFAULT_METHOD)
    evidence = {"lowest_loss": float(losses[best]), "lowest_at": float(lrs[best]),
                "sweep": [float(lrs[0]), float(lrs[-1])], "diverged_at": diverged_at,
                "suggestion": reading}
    if best == len(losses) - 1 and diverged_at is None:
        return [Finding(
            "LR_SWEEP_EDGE", "warning", "loss",
            f"the smoothed loss was still at its lowest ({losses[best]:.4g}) at lr "
            f"{lrs[best]:.2g}, the top of the sweep: it never reached the rates where the loss "
            f"turns up, so minimum/10 ({_lr_text(reading)}) is a tenth of the largest rate "
            f"tried, not of a measured minimum, and is not known to be safe",
            f"sweep higher (end_lr={lrs[-1] * 10:g}) until the loss diverges"
            + (", and" + loader if loader else ""),
            {**evidence, "edge": "top"})]
    if best == skip and (not flat or diverged_at is not None):
        return [Finding(
            "LR_SWEEP_EDGE", "warning", "loss",
            f"the smoothed loss was at its lowest ({losses[best]:.4g}) at lr "
            f"{lrs[best]:.2g}, at the bottom of the sweep, and only rose after: even the "
            f"first rates may be too high, and minimum/10 ({_lr_text(reading)}) lies below "
            f"every rate tried",
            f"sweep lower (start_lr={lrs[0] / 100:g})", {**evidence, "edge": "bottom"})]
    return []


def _steepest(lrs, losses):
    """The lr where d(loss)/d(log lr) is most negative on the way down to the lowest loss,
    skipping the smoothing's warm-up."""
    skip = _warm_up(losses)
    bottom = skip + int(np.argmin(losses[skip:]))
    slopes = np.gradient(losses, np.log(lrs))[skip:bottom + 1]
    if not len(slopes) or slopes.min() >= 0:
        return None
    return float(lrs[skip + int(np.argmin(slopes))])


def _valley(lrs, losses):
    """fastai's valley: a point inside the longest decreasing stretch of the loss, before its
    end."""
    count = len(losses)
    longest = [1] * count
    start = end = 0
    for i in range(1, count):
        for j in range(i):
            if losses[i] < losses[j] and longest[i] < longest[j] + 1:
                longest[i] = longest[j] + 1
        if longest[end] < longest[i]:
            end = i
            start = end - longest[end]
    sections = (end - start) / 3
    return float(lrs[start + int(sections) + int(sections / 2)])


def _lr_text(lr):
    return "none (curve too short)" if lr is None else f"{lr:.3g}"
