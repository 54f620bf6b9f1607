"""The learning rate of every step (the first parameter group's), read as a path against the
run's own length, whatever scheduler (or hand-written rule) sets it:

- a decay consumed in a small part of the run: the rate fell to ~0 (below ``COLLAPSED`` of its
  peak) and stayed there for as long as the fall took, or its decay was done (below
  ``DECAYED``) within the first quarter of the run since the peak;
- a schedule run past its end: the rate fell below ``DECAYED`` of its peak and climbed back
  gradually, cycle after cycle (a cosine stepped past ``T_max``); a warm restart jumps back in
  one step and a cyclic schedule (CyclicLR, CosineAnnealingWarmRestarts) cycles by design;
- a warm-up that never hands over: the rate climbs towards the base rate its scheduler was
  built with (``initial_lr``) so slowly, one rise every few optimizer steps, that at this pace
  it reaches the base only after twenty times the run so far (a warm-up in optimizer steps with
  ``scheduler.step()`` once per epoch).

A Python float read per step and a counter in the optimizer's step pre-hook: no device work.
"""
from dataclasses import dataclass

from .base import Probe, Signal
from .optimizer_hooks import add_step_hooks

COLLAPSED = 1e-3          # the rate is ~0: below this share of the peak a step changes nothing
DECAYED = 1e-2            # a decay is done: the rate is below this share of its peak
MIN_LOW_STEPS = 10        # a collapse or decay is judged once it has lasted this long
CONSUMED_SHARE = 0.25     # a decay done within this share of the run since the peak
CYCLES = 3                # a schedule run past its end: this many falls below DECAYED
WARMUP_MIN_RISES = 3      # a slow warm-up is judged after this many rises of the rate...
WARMUP_FAR = 0.1          # ...while it is below this share of the base rate...
WARMUP_PACE = 20.0        # ...and its pace puts the base this many runs-so-far away
CYCLIC_BY_DESIGN = ("CyclicLR", "CosineAnnealingWarmRestarts")
FALLBACK_STEPS = 50       # no scheduler to read (a rate set by hand): a fall in a few dozen steps


@dataclass(frozen=True)
class FastSchedule(Signal):
    """A decay consumed early (``cycled=False``: the rate fell below ``depth`` of its peak at
    ``collapse_step`` and stayed) or a schedule run past its end (``cycled=True``: it fell
    below ``DECAYED`` and came back gradually above half the peak, ``back_step`` the first
    time, ``cycles`` falls by the time it was judged)."""

    peak: float
    peak_step: int
    collapse_step: int
    lowest: float
    lowest_step: int
    cycled: bool
    back_step: int | None = None
    depth: float = COLLAPSED
    judged_step: int = 0
    cycles: int = 1
    scheduler: str | None = None     # the scheduler that drives the optimizer, when found


@dataclass(frozen=True)
class SlowWarmup(Signal):
    """A warm-up whose pace puts the base rate far beyond the run: ``rises`` rises of the rate
    in ``optimizer_steps`` optimizer steps (one every ``steps_per_rise``), now ``lr`` against
    the base ``base_lr``, which this pace reaches after about ``steps_to_base`` steps."""

    lr: float
    base_lr: float
    rises: int
    optimizer_steps: int
    steps_per_rise: float
    steps_to_base: float
    step: int
    scheduler: str | None = None


@dataclass(frozen=True)
class PeakLearningRate(Signal):
    """The highest learning rate of the run so far (advice scales from it, not from a rate
    the schedule has since decayed)."""

    value: float


class ScheduleProbe(Probe):
    publishes = (FastSchedule, SlowWarmup, PeakLearningRate)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.fast = None                # the first FastSchedule seen
        self.slow_warmup = None         # the first SlowWarmup seen
        self._peak, self._peak_step = 0.0, 0
        self._reset_fall()
        self._last_lr = None
        self._first_rise_lr = None
        self._rises, self._first_rise_steps = 0, None
        self._optimizer_steps, self._hooks = 0, []
        self._hooked = False

    def _reset_fall(self):
        self._lowest = self._lowest_step = None
        self._decay_step = self._collapse_step = None   # where the current low stretch began
        self._decayed_steps = self._low_steps = 0        # ...and how long it has lasted
        self._falls, self._below, self._back_step, self._rising_run = 0, False, None, 0
        self._first_fall_step = None
        self._schedulers = None           # found when a fall is first judged

    def on_step(self, loss):
        if not self._hooked:
            self._hooked = True
            self._hooks = add_step_hooks(self.ctx.optimizer, before=self._count_optimizer_step)
        lr = _first_lr(self.ctx.optimizer)
        if lr is None:
            return False
        if self.slow_warmup is None:
            self._follow_warmup(lr)
        if self.fast is None:
            self._follow_path(lr, self._last_lr)
        self._last_lr = lr
        return False

    def _count_optimizer_step(self):
        self._optimizer_steps += 1

    def _optimizer_step_count(self):
        """Optimizer steps so far: counted by the step pre-hook, else one per iteration."""
        return self._optimizer_steps if self._hooks else self.ctx.step + 1

    # -- a decay consumed early, or a schedule run past its end --------------------------

    def _follow_path(self, lr, previous):
        step = self.ctx.step
        if previous is not None and lr != previous:   # a staircase keeps its run
            self._rising_run = self._rising_run + 1 if lr > previous else 0
        if self._below and lr >= 0.5 * self._peak:          # back up after a fall...
            self._below = False
            if self._rising_run < 3:                         # ...in a jump: a warm restart
                self._peak, self._peak_step = lr, step
                self._reset_fall()
                return
            if self._back_step is None:                      # ...gradually: a cycle
                self._back_step = step
        if lr > self._peak and not self._falls:             # a new peak (warm-up)
            self._peak, self._peak_step = lr, step
            self._reset_fall()
            return
        if self._lowest is None or lr < self._lowest:
            self._lowest, self._lowest_step = lr, step
        level = lr / self._peak * (1 - 1e-9) if self._peak > 0 else 1.0   # 0.1**3 is 1e-3
        decayed, collapsed = level <= DECAYED, level <= COLLAPSED
        if decayed and not self._below:
            self._below = True
            self._falls += 1
            self._first_fall_step = step if self._falls == 1 else self._first_fall_step
        self._decay_step = (step if decayed and not self._decayed_steps
                            else self._decay_step if decayed else None)
        self._decayed_steps = self._decayed_steps + 1 if decayed else 0
        self._collapse_step = (step if collapsed and not self._low_steps
                               else self._collapse_step if collapsed else None)
        self._low_steps = self._low_steps + 1 if collapsed else 0
        self._judge_path(step)

    def _judge_path(self, step):
        """A path that looks consumed early or run past its end is reported when the scheduler
        that drives the optimizer is stepped about once per optimizer step (its settings then
        had to be in steps); with no scheduler found (a rate set by hand), only when the fall
        took a few dozen steps."""
        fall = self._peak_step
        if self._back_step is not None:
            if self._falls >= CYCLES:
                self._report_if_per_step(cycled=True, depth=DECAYED, step=step,
                                         took=self._back_step - fall)
            return
        if self._low_steps and self._low_steps >= max(MIN_LOW_STEPS,
                                                      self._collapse_step - fall):
            self._report_if_per_step(cycled=False, depth=COLLAPSED, step=step,
                                     took=self._collapse_step - fall)
        elif self._decayed_steps and self._decayed_steps >= max(
                MIN_LOW_STEPS, (self._decay_step - fall) * (1 - CONSUMED_SHARE) / CONSUMED_SHARE):
            self._report_if_per_step(cycled=False, depth=DECAYED, step=step, took=None)

    def _report_if_per_step(self, *, cycled, depth, step, took):
        if self._schedulers is None:              # one heap scan per fall
            self._schedulers = schedulers_of(self.ctx.optimizer)
        found = self._schedulers
        steps = self._optimizer_step_count()
        per_step = [s for s in found if _stepped_per_step(s, steps)
                    and not (cycled and type(s).__name__ in CYCLIC_BY_DESIGN)]
        if per_step or (not found and took is not None and took <= FALLBACK_STEPS):
            self.fast = self._record(cycled=cycled, depth=depth, step=step)

    def _record(self, *, cycled, depth, step):
        collapse = self._collapse_step if depth == COLLAPSED else self._decay_step
        if cycled:
            collapse = self._first_fall_step
        return FastSchedule(self._peak, self._peak_step, collapse, self._lowest,
                            self._lowest_step, cycled, self._back_step if cycled else None,
                            depth, step, self._falls, self._describe_schedulers())

    def _describe_schedulers(self):
        """The schedulers on the optimizer, their settings and how often they were stepped:
        ``StepLR(step_size=30, gamma=0.1), stepped 240 times in 240 optimizer steps``."""
        found = (self._schedulers if self._schedulers is not None
                 else schedulers_of(self.ctx.optimizer))
        if not found:
            return None
        steps = self._optimizer_step_count()
        return "; ".join(f"{_settings_text(s)}, stepped {s.last_epoch} times in the {steps} "
                         f"optimizer steps watched" for s in found)

    # -- a warm-up that never hands over ---------------------------------------------------

    def _follow_warmup(self, lr):
        previous = self._last_lr
        if previous is None or lr <= previous:
            if previous is not None and lr < previous:
                self._rises, self._first_rise_steps = 0, None    # not a warm-up (any more)
            return
        steps = self._optimizer_step_count()
        self._rises += 1
        if self._first_rise_steps is None:
            self._first_rise_steps = steps
            self._first_rise_lr = previous
            return
        base = _base_lr(self.ctx.optimizer)
        if base is None or lr >= WARMUP_FAR * base or self._rises < WARMUP_MIN_RISES:
            return
        per_rise = (steps - self._first_rise_steps) / (self._rises - 1)
        gained = (lr - self._first_rise_lr) / self._rises
        if per_rise < 2 or gained <= 0:        # a rise every optimizer step: a per-step warm-up
            return
        to_base = steps + (base - lr) / gained * per_rise
        if to_base >= WARMUP_PACE * steps:
            self.slow_warmup = SlowWarmup(lr, base, self._rises, steps, per_rise, to_base,
                                          self.ctx.step, self._describe_schedulers())

    def signals(self):
        published = (self.fast, self.slow_warmup,
                     PeakLearningRate(self._peak) if self._peak else None)
        return tuple(value for value in published if value is not None)

    def close(self):
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        self._schedulers = None


def _first_lr(optimizer):
    groups = getattr(optimizer, "param_groups", None)
    if not groups or not isinstance(groups[0], dict):
        return None
    try:
        return float(groups[0].get("lr"))      # a tensor lr (capturable Adam) reads too
    except (TypeError, ValueError):
        return None


def _base_lr(optimizer):
    """The rate a torch scheduler was built from (it stores it as ``initial_lr``), else None."""
    try:
        return float(optimizer.param_groups[0]["initial_lr"])
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        return None


def _stepped_per_step(scheduler, optimizer_steps):
    """Whether ``scheduler.step()`` ran about once per optimizer step (at least half as often:
    a per-epoch scheduler runs once every len(loader) steps)."""
    count = getattr(scheduler, "last_epoch", None)
    return (isinstance(count, (int, float)) and optimizer_steps > 0
            and count >= 0.5 * optimizer_steps)


def schedulers_of(optimizer):
    """The learning-rate schedulers alive in the process that hold ``optimizer``: found among
    the objects that refer to it (a scheduler keeps ``self.optimizer``), so the user passes
    nothing. A scan of the heap: called once, when a finding is about to name them."""
    import gc
    found = []
    for referrer in gc.get_referrers(optimizer):
        owners = [referrer]
        if isinstance(referrer, dict) and referrer.get("optimizer") is optimizer:
            owners = gc.get_referrers(referrer)
        for owner in owners:
            if (getattr(owner, "optimizer", None) is optimizer
                    and hasattr(owner, "last_epoch") and owner not in found):
                found.append(owner)
    return found


_SETTINGS = ("step_size", "milestones", "gamma", "T_max", "T_0", "total_iters", "total_steps",
             "start_factor", "end_factor", "power", "eta_min")


def _settings_text(scheduler):
    """``StepLR(step_size=30, gamma=0.1)``: the class and the settings a schedule's length is
    in (a LambdaLR's lambda is opaque: its class only)."""
    settings = []
    for name in _SETTINGS:
        value = getattr(scheduler, name, None)
        if value is None or isinstance(value, bool):
            continue
        if hasattr(value, "elements"):                 # MultiStepLR's Counter of milestones
            value = sorted(value.elements())
        if isinstance(value, (int, float, list, tuple)):
            settings.append(f"{name}={value!r}" if not isinstance(value, float)
                            else f"{name}={value:g}")
    return f"{type(scheduler).__name__}({', '.join(settings)})"
