"""``AttachedMonitor``: what a trainer callback keeps between its events.

A trainer runs several forward/backward passes per optimizer step when it accumulates
gradients; the callback hands each micro-batch's loss to ``add_loss`` and calls ``step()`` once
the optimizer has stepped, so the Monitor sees one iteration per optimizer step with the mean
loss of its micro-batches.
"""
import logging
import numbers

from ..errors import require
from ..monitor import Monitor
from ..monitor.guard import GUARD_MODES
from ..monitor.settings import DEFAULT_EVERY

log = logging.getLogger("gradhunt")

SEVERITY_LEVELS = {"info": 1, "warning": 2, "error": 3}   # the number a metric logger gets


def checked_guard(guard):
    """A callback's ``guard=`` (``Monitor(guard=...)``), checked when the callback is built."""
    require(guard in GUARD_MODES, "guard", f"one of {GUARD_MODES}", repr(guard))
    return guard


def checked_options(every, sinks, print_report):
    """The callbacks' own argument checks, made when the callback is built."""
    require(isinstance(every, numbers.Integral) and not isinstance(every, bool) and every >= 1,
            "every", "an integer >= 1", repr(every))
    require(isinstance(print_report, bool), "print_report", "True or False",
            type(print_report).__name__)
    return every, tuple(sinks or ()), print_report


class AttachedMonitor:
    """A Monitor on a trainer's model, fed one mean loss per optimizer step.

    An exception inside the Monitor never stops the training run: the Monitor is closed, the
    error kept in ``failure`` (and logged), and the run goes on unwatched. ``guard`` is the
    Monitor's (it needs the trainer's one optimizer); ``GuardStopped`` is the one exception
    meant to stop the run, raised from the optimizer's step.
    """

    def __init__(self, model, optimizer, *, every=DEFAULT_EVERY, sinks=(), on_finding=None,
                 guard=None):
        self.monitor = Monitor(model, optimizer, every=every, sinks=sinks,
                               on_finding=on_finding,
                               guard=guard if optimizer is not None else None)
        self.failure = None
        self._losses, self._steps = [], 0

    def add_loss(self, loss, *, graph=False):
        """One micro-batch's loss (a one-element tensor); detached here unless ``graph``: the
        loss backward ran on, kept with its graph until ``step()`` for the Monitor's graph
        signals (which layers it reached, what produced the output, a softmax fed to
        cross-entropy)."""
        self._losses.append(loss.reshape(()) if graph else loss.detach().reshape(()))

    def step(self):
        """The optimizer stepped: one Monitor iteration with the mean of the losses since."""
        losses, self._losses = self._losses, []
        if not losses or self.failure is not None:
            return
        import torch

        try:
            self.monitor.step(losses[0] if len(losses) == 1
                              else torch.stack(losses).float().mean())
            self._steps += 1
        except Exception as error:
            self.failure = (f"gradhunt stopped watching at step {self._steps}: "
                            f"{type(error).__name__}: {error}")
            log.warning("%s", self.failure)
            self.monitor.close()

    def report(self):
        return self.monitor.report()

    def report_text(self, report):
        """``report`` as printed at the end of a run, with the failure if there was one."""
        return str(report) if self.failure is None else f"{report}\n\n{self.failure}"

    def close(self):
        self.monitor.close()


def log_finding(finding, where):
    """A new finding, as a line on the ``gradhunt`` logger."""
    level = logging.WARNING if finding.is_alarm else logging.INFO
    log.log(level, "gradhunt %s: %s", where, finding)
