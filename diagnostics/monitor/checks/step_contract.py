"""Clauses of the training-step contract (``probes.step_contract``): gradients cleared once per
optimizer step and never inside its window, clipping on the gradients the step applies."""
from ...findings import Finding
from ..probes.step_contract import StepContract

MIN_PASSES = 3       # two passes per step with a clear between are also SAM (the first
                     # gradient picks the perturbation, the second is applied)
MIN_WINDOWS = 2      # a clause broken at two optimizer steps at least...
MIN_SHARE = 0.5      # ...and at half of the steps it could be judged at: a habit of the loop,
                     # not one odd step (an epoch's end, a skipped batch)

_CLEARING = {"set to None": "zero_grad() or .grad = None",
             "zeroed in place": "zero_grad(set_to_none=False) or .grad.zero_()"}


def accumulation_discarded(view):
    """ACCUMULATION_DISCARDED: at ``MIN_WINDOWS`` optimizer steps or more, ``.grad`` was
    cleared between backward passes of the same step, with at least ``MIN_PASSES`` passes in
    that step: the step applied only the passes after the last clearing."""
    contract = view.signal(StepContract)
    if contract is None:
        return []
    windows = [w for w in contract.discarding if w.passes >= MIN_PASSES]
    if len(windows) < MIN_WINDOWS:
        return []
    first = windows[0]
    kept = first.passes - first.discarded
    return [Finding(
        "ACCUMULATION_DISCARDED", "error", "optimizer",
        f"gradient accumulation keeps only the last micro-batches: the optimizer step at step "
        f"{first.step} applied {kept} of the {first.passes} backward passes since the "
        f"previous step: .grad was cleared between them ({_CLEARING[first.how]}) and the "
        f"gradients of the other {first.discarded} were thrown away; "
        f"{contract.discarding_count} of {contract.windows} steps dropped gradients this way",
        "clear the gradients only right after optimizer.step() (or before the first "
        "micro-batch of a step), never inside the micro-batch loop or at an epoch start "
        "while a window is unfinished; step on a leftover window before clearing it",
        {"step": first.step, "backward_passes": first.passes,
         "discarded_passes": first.discarded, "cleared_by": first.how,
         "dropping_steps": contract.discarding_count, "steps": contract.windows,
         "windows": [[w.step, w.passes, w.discarded] for w in contract.discarding],
         "watched_parameter": contract.parameter})]


def gradients_cleared_before_step(view):
    """GRADIENTS_CLEARED_BEFORE_STEP: the gradient of the window's backward passes was
    cleared before the optimizer step that was to apply it, at ``MIN_WINDOWS`` steps and at
    ``MIN_SHARE`` of the steps with a backward pass."""
    contract = view.signal(StepContract)
    if contract is None or not _habit(contract.cleared_count, contract.windows):
        return []
    first = contract.cleared[0]
    return [Finding(
        "GRADIENTS_CLEARED_BEFORE_STEP", "error", "optimizer",
        f"the gradients are cleared between loss.backward() and optimizer.step(): at step "
        f"{first.step}, .grad of {contract.parameter} was {first.how} after the backward pass "
        f"and before the step, so the step applied no gradient (only weight decay or "
        f"momentum left over moves the parameters); {contract.cleared_count} of "
        f"{contract.windows} steps so far were taken this way",
        f"move {_CLEARING[first.how]} to just after optimizer.step() (or to the start of the "
        f"iteration, before the forward pass)",
        {"step": first.step, "cleared_by": first.how, "cleared_steps": contract.cleared_count,
         "steps": contract.windows, "watched_parameter": contract.parameter})]


def clip_has_no_effect(view):
    """CLIP_HAS_NO_EFFECT: the window's clipping calls did not act on the gradients its
    optimizer step applied, at ``MIN_WINDOWS`` steps and ``MIN_SHARE`` of the steps that
    clipped: each ran before the window's first backward pass (after the previous step), or
    on tensors none of which held a gradient (an exhausted generator, a copy)."""
    contract = view.signal(StepContract)
    if contract is None or not _habit(contract.ineffective_count, contract.clipped_windows):
        return []
    first = contract.ineffective[0]
    call = f"{first.function}(...)"
    if first.reason == "no_gradients":
        why = ("it was given no tensors: an iterator such as model.parameters() that an "
               "earlier call (the optimizer's constructor, a previous clip) already consumed"
               if first.tensors == 0 else
               f"none of the {first.tensors} tensors it was given is trained by the optimizer "
               f"or holds a gradient: parameters of another model object, or of a copy")
        fix = (f"pass {first.function} the parameters of the model being trained, fresh at "
               f"each call: {first.function}(model.parameters(), ...)"
               + (", not a saved model.parameters() generator (or keep them in a list)"
                  if first.tensors == 0 else
                  ", not those of a copy (an EMA or target model) or of another model"))
    else:
        why = ("it ran outside the window between loss.backward() and optimizer.step() (after "
               "a step, before the next backward): it clipped gradients that were already "
               "applied, or that zero_grad() then cleared, and the gradients the step applied "
               "were not clipped")
        fix = (f"call {first.function} after loss.backward() and before optimizer.step() "
               f"(after scaler.unscale_(optimizer) with a GradScaler)")
    return [Finding(
        "CLIP_HAS_NO_EFFECT", "warning", "optimizer",
        f"gradient clipping has no effect on the steps: at step {first.step}, {call}: {why}; "
        f"{contract.ineffective_count} of the {contract.clipped_windows} steps so far that "
        f"called it applied unclipped gradients",
        fix,
        {"step": first.step, "function": first.function, "reason": first.reason,
         "tensors": first.tensors, "with_gradient": first.with_gradient,
         "ineffective_steps": contract.ineffective_count,
         "clipping_steps": contract.clipped_windows})]


def _habit(count, out_of):
    return count >= MIN_WINDOWS and count >= MIN_SHARE * out_of


CHECKS = (accumulation_discarded, gradients_cleared_before_step, clip_has_no_effect)
