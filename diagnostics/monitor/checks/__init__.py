"""The Monitor's checks, one family per file: each reads a ``WindowView``, returns findings.

``URGENT`` checks are cheap and run on every sampled step (NaN loss, stale or exploding
gradients: the alerts that should not wait); the others run at most every ``FULL_CHECK_STEPS``
steps and on every ``report()``.
"""
from . import accumulation, activations, gradients, graph, inputs, loss, modes, schedule, updates

FULL_CHECK_STEPS = 50

URGENT = (loss.nan_loss, gradients.stale_gradients, gradients.exploding_gradients)

CHECKS = (loss.CHECKS + gradients.CHECKS + updates.CHECKS + activations.CHECKS + inputs.CHECKS
          + modes.CHECKS + graph.CHECKS + schedule.CHECKS
          + accumulation.CHECKS)


def run_checks(view, *, urgent_only=False, skip=frozenset(), on_error=None):
    """The findings of every check (or of the urgent ones) for ``view``, but those in
    ``skip``. A check that raises is handed to ``on_error(check, exception)`` when given (the
    Monitor turns it off), else the exception propagates."""
    findings = []
    for check in (URGENT if urgent_only else CHECKS):
        if check in skip:
            continue
        try:
            findings += check(view)
        except Exception as error:
            if on_error is None:
                raise
            on_error(check, error)
    return findings


__all__ = ["CHECKS", "URGENT", "FULL_CHECK_STEPS", "run_checks"]
