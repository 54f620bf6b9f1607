"""The step guard (``Monitor(guard=...)``): what the per-step tier does with a bad step.

A bad step is an optimizer step whose gradients hold NaN or inf, or whose total gradient norm
spikes far above the run's own recent history (``probes/step_gradients.py`` judges it, at the
optimizer's step pre-hook, before anything is applied). ``guard=None`` reports it; ``"skip"``
keeps the optimizer from applying it (the step runs with no gradient in view, so every torch
optimizer leaves the parameters and its state as they were; the gradients are put back
afterwards, for code that reads them); ``"stop"`` raises ``GuardStopped`` once the report is
written. ``max_consecutive_skips`` skips in a row mean the fault is not passing: the guard
stops. With ``guard_replay=True`` a bad step is first replayed from its starting state on the
same batch (``replay.py``): a fault the replay does not reproduce is transient, and the step is
retried with the replay's gradients instead of being dropped.
"""
from dataclasses import dataclass

GUARD_MODES = (None, "skip", "stop")
DEFAULT_MAX_CONSECUTIVE_SKIPS = 10


@dataclass(frozen=True)
class BadStep:
    """One optimizer step the per-step tier judged bad, and what became of it."""

    step: int                  # the Monitor's step count (``monitor.step`` calls before it)
    batches: tuple[int, int]   # the first and last training forward passes of its window
    reason: str                # "nonfinite" or "spike"
    norm: float                # its total gradient norm (inf or NaN for "nonfinite")
    median: float | None       # the median norm of the recent steps it was judged against
    parameter: str | None      # nonfinite: the one nearest the output; spike: the largest
    nonfinite: int             # parameters whose gradient holds NaN or inf
    source: str | None         # where it came from: "data", "loss", "forward", "backward",
                               # "transient", or None when not traced
    detail: str                # that source in words ("input 0 of batch 12 holds 3 NaN")
    action: str                # "applied", "skipped", "retried" or "stopped"


class GuardStopped(RuntimeError):
    """Raised by ``Monitor(guard="stop")`` (or after too many consecutive skips) from inside
    ``optimizer.step()``, before the bad step is applied: the parameters are those of the last
    good step. ``report`` is the Monitor's report at that moment, ``bad_step`` the step."""

    def __init__(self, message, *, report, bad_step):
        super().__init__(message)
        self.report = report
        self.bad_step = bad_step


class StepGuard:
    """The guard's decisions and its counts; the probe measures, this decides."""

    def __init__(self, mode, *, max_consecutive_skips):
        self.mode = mode
        self.max_consecutive_skips = max_consecutive_skips
        self.consecutive = 0

    def action(self, retry, *, transient=False):
        """What to do with a bad step: "retried" when the replay gave clean gradients, else
        "applied" (no guard), "skipped" or "stopped". A transient fault that cannot be retried
        is skipped without counting towards the consecutive limit (it did not persist)."""
        if retry:
            self.consecutive = 0
            return "retried"
        if transient and self.mode == "skip":
            return "skipped"
        if self.mode is None:
            return "applied"
        if self.mode == "stop":
            return "stopped"
        self.consecutive += 1
        return "stopped" if self.consecutive > self.max_consecutive_skips else "skipped"

    def good_step(self):
        self.consecutive = 0
