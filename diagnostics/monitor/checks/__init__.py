"""The Monitor's checks, one family per file, named as the probe whose signal it reads
(``checks/clipping.py`` reads ``probes/clipping.py``'s): each reads a ``WindowView``, returns
findings.

``URGENT`` checks are cheap and run on every sampled step (NaN loss, stale or exploding
gradients: the alerts that should not wait); the others run at most every ``FULL_CHECK_STEPS``
steps and on every ``report()``.
"""
from . import (activations, clipping, detached_terms, eval_randomness, frozen_norm, gradients,
               graph, inputs, loss, loss_inputs, mixed_precision, model_calls, model_structure,
               modes, next_token, optimizer_eps, probabilities, registration, schedule,
               step_contract, step_gradients, target_gradients, target_network, targets,
               training_mode, updates)

FULL_CHECK_STEPS = 50

URGENT = (loss.nan_loss, gradients.stale_gradients, gradients.exploding_gradients,
          mixed_precision.amp_overflow) + step_gradients.CHECKS + (
          # root causes whose evidence is counted per step, cheap to read: seen before the
          # symptoms they cause are reported
          step_contract.gradients_cleared_before_step, step_contract.clip_has_no_effect)

CHECKS = (loss.CHECKS + gradients.CHECKS + updates.CHECKS + activations.CHECKS + inputs.CHECKS
          + modes.CHECKS + graph.CHECKS + training_mode.CHECKS + probabilities.CHECKS
          + mixed_precision.CHECKS + clipping.CHECKS + optimizer_eps.CHECKS
          + step_gradients.CHECKS + schedule.CHECKS
          + step_contract.CHECKS + eval_randomness.CHECKS + registration.CHECKS
          + model_structure.CHECKS + frozen_norm.CHECKS
          + loss_inputs.CHECKS + targets.CHECKS + target_gradients.CHECKS
          + detached_terms.CHECKS + model_calls.CHECKS + next_token.CHECKS
          + target_network.CHECKS)


def run_checks(view, *, urgent_only=False, skip=frozenset(), on_error=None):
    """The findings of every check (or of the urgent ones) for ``view``, but those in
    ``skip`` (see ``run_each``)."""
    return [finding for _, found in run_each(view, urgent_only=urgent_only, skip=skip,
                                             on_error=on_error) for finding in found]


def run_each(view, *, urgent_only=False, skip=frozenset(), on_error=None):
    """``[(check, its findings)]`` for every check that ran, but those in ``skip``: a check
    that ran and found nothing is the evidence that its earlier findings stopped holding. A
    check that raises is handed to ``on_error(check, exception)`` when given (the Monitor
    turns it off) and left out, else the exception propagates."""
    results = []
    for check in (URGENT if urgent_only else CHECKS):
        if check in skip:
            continue
        try:
            results.append((check, check(view)))
        except Exception as error:
            if on_error is None:
                raise
            on_error(check, error)
    return results


__all__ = ["CHECKS", "URGENT", "FULL_CHECK_STEPS", "run_checks", "run_each"]
