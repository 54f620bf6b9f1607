"""The learning rate of every step (the first parameter group's): where it peaked, and whether
it then collapsed within a few dozen steps and stayed there, or cycled straight back up. A
Python float read per step: no device work."""
from dataclasses import dataclass

from .base import Probe

COLLAPSE_FACTOR = 1e-3    # collapsed: below this share of the peak
COLLAPSE_STEPS = 50       # "a few dozen steps": an epoch-scale schedule stepped per batch
MIN_LOW_STEPS = 10        # and it stays collapsed this long (and as long as the fall took)


@dataclass(frozen=True)
class FastSchedule:
    """A collapse within ``COLLAPSE_STEPS`` of the peak that stayed (``cycled=False``) or that
    rose back above half the peak (``cycled=True``, at ``back_step``)."""

    peak: float
    peak_step: int
    collapse_step: int
    lowest: float
    lowest_step: int
    cycled: bool
    back_step: int | None = None


class ScheduleProbe(Probe):

    def __init__(self, ctx):
        super().__init__(ctx)
        self.fast = None                # the first FastSchedule seen
        self._peak, self._peak_step = 0.0, 0
        self._collapse_step = self._lowest = self._lowest_step = None
        self._low_steps = 0

    def on_step(self, loss):
        if self.fast is not None:
            return False
        lr = _first_lr(self.ctx.optimizer)
        if lr is None:
            return False
        step = self.ctx.step
        fell_fast = (self._collapse_step is not None
                     and self._collapse_step - self._peak_step <= COLLAPSE_STEPS)
        if fell_fast and lr >= 0.5 * self._peak:
            self.fast = self._record(cycled=True, back_step=step)
        elif lr > self._peak:                  # a new peak (warm-up): start over from it
            self._peak, self._peak_step = lr, step
            self._collapse_step = self._lowest = self._lowest_step = None
            self._low_steps = 0
        else:
            if self._lowest is None or lr < self._lowest:
                self._lowest, self._lowest_step = lr, step
            if lr < COLLAPSE_FACTOR * self._peak:
                if self._collapse_step is None:
                    self._collapse_step = step
                    fell_fast = step - self._peak_step <= COLLAPSE_STEPS
                self._low_steps += 1
                if fell_fast and self._low_steps >= max(
                        MIN_LOW_STEPS, self._collapse_step - self._peak_step):
                    self.fast = self._record(cycled=False)
            else:
                self._low_steps = 0
        return False

    def _record(self, *, cycled, back_step=None):
        return FastSchedule(self._peak, self._peak_step, self._collapse_step, self._lowest,
                            self._lowest_step, cycled, back_step)

    def view_fields(self):
        return {"signals": {"fast_schedule": self.fast,
                            "peak_learning_rate": self._peak or None}}


def _first_lr(optimizer):
    groups = getattr(optimizer, "param_groups", None)
    if not groups or not isinstance(groups[0], dict):
        return None
    try:
        return float(groups[0].get("lr"))      # a tensor lr (capturable Adam) reads too
    except (TypeError, ValueError):
        return None
