"""Items that train: overfit one batch (OVERFIT_FAILED, with the default Adam as a second
opinion on a slow optimizer), a few steps under a ``Monitor`` with the loss going down
(LOSS_DIVERGING, LOSS_PLATEAU; the Monitor's findings become ``Facts.watched``, with the mode
the user's ``train_step`` trained in: TRAINING_IN_EVAL_MODE, ``modes``), and the user's
``train_step`` against loss_fn's gradient on the batch (STEP_NOT_OBJECTIVE)."""
from __future__ import annotations

import math

from ...findings import Finding
from ...monitor import Monitor
from ...monitor.settings import Thresholds
from .. import _training as T
from .. import overfit as overfit_tool
from ..contexts import eval_mode
from ..overfit import DEFAULT_LR
from .context import Run
from .modes import ModeRecorder, eval_mode_finding
from .monitored import CLAIMED_CODES, MODE_CODES
from ..step_equivalence import check_step_equivalence
from .report import FAIL, SKIP, Outcome, failed, first_line, judged, passed, skipped, status_of

TRAIN_STEPS = 8           # steps watched by the Monitor
OVERFIT_STEPS = 200
# LOSS_DIVERGING: the loss rose by more than this share of its room to progress (how far it
# is from the uninformative output's loss, at least CHANCE_BAND of that loss; without one,
# the loss itself): the Monitor's "1.5 times its first value" on the loss's own scale
DIVERGING_SHARE = 0.5
CHANCE_BAND = 2 * Thresholds().chance_tolerance   # the Monitor's band around chance
# a loss below this share of the uninformative output's loss has been trained already: a
# small rise over a few steps at a fresh optimizer's rates is its noise, not a plateau
TRAINED_SHARE = 0.5


def overfit(run: Run) -> Outcome:
    result = _overfit_with(run, run.optimizer)
    if result.inconclusive:   # the loss cannot reach the target by design: nothing to judge
        return skipped(result.headline, result.findings)
    if result.passed or run.optimizer is None:
        return (passed if result.passed else failed)(result.headline, result.findings)
    run.restore()
    fallback = _overfit_with(run, None)   # Adam(lr=DEFAULT_LR): is it the optimizer?
    if not fallback.passed:
        return failed(result.headline, result.findings)
    return failed(result.headline, [_slow_optimizer_finding(result, fallback, run.optimizer)])


def _overfit_with(run: Run, optimizer):
    return overfit_tool.run(run.backend, run.batch, optimizer=optimizer,
                            train_step=run.train_step, steps=OVERFIT_STEPS,
                            stop_when_memorising=True)


def training_steps(run: Run) -> Outcome:
    """A few steps through ``train_step`` (or a plain step) under a Monitor."""
    optimizer = T.make_optimizer(run.backend, run.optimizer, lr=DEFAULT_LR)
    state = run.backend.rng_state()
    before = _measured_loss(run, state)
    recorder = ModeRecorder(run.backend)
    with T.at_base_rates(optimizer), Monitor(run.backend.model, optimizer, every=1,
                                             window=TRAIN_STEPS,
                                             output=run.batch.selector) as monitor, \
            recorder.watching():
        for _ in range(TRAIN_STEPS):
            monitor.step(_one_step(run, optimizer, recorder))
        report = monitor.report()
    findings = _with_step_modes(report.findings, recorder)
    skipped_steps = report.mixed_precision.get("skipped_steps", 0)
    after = _measured_loss(run, state)
    return _loss_trend(run, before, after, findings, skipped_steps)


def _with_step_modes(findings, recorder):
    """The Monitor's findings, with preflight's own reading of the modes the user's step
    trained in in place of the Monitor's TRAINING_IN_EVAL_MODE (which needs a switch seen at a
    pass without gradients; this reads every call, and names train_step)."""
    own = eval_mode_finding(recorder.modes())
    if own is None:
        return tuple(findings)
    return (*[f for f in findings if f.code not in MODE_CODES], own)


def _one_step(run: Run, optimizer, recorder):
    """One step; its loss from ``train_step``'s return value, or measured after it. A loss
    tensor goes to the Monitor as it is: the checks that read its graph (a sigmoid before
    BCE with logits) need it, not its value."""
    backend, batch = run.backend, run.batch
    if run.train_step is None:
        backend.zero_grad()
        _, loss = batch.output_and_loss(backend)
        if math.isfinite(backend.scalar(loss)):
            backend.backward(loss)
            optimizer.step()
        return loss
    with recorder.call():
        returned = run.train_step(backend.model, (batch.inputs, batch.targets), optimizer)
    if backend.is_tensor(returned):
        return returned
    if isinstance(returned, (int, float)):
        return backend.scalar(returned)
    with eval_mode(backend):  # the Monitor would take a train-mode pass for a bug
        return _measured_loss(run, None)


def _measured_loss(run: Run, rng) -> float:
    """The loss on the batch without a graph; with ``rng``, the same dropout draws each time."""
    if rng is not None:
        run.backend.set_rng_state(rng)
    with run.backend.no_grad():
        _, loss = run.batch.output_and_loss(run.backend)
    return run.backend.scalar(loss)


# the Monitor's language-model reads: with causal=True the one-batch items judge them (the
# batch independence and next-token items), and the training steps leave them to those
ONE_BATCH_CODES = ("TARGETS_MISALIGNED", "CAUSALITY_LEAK")


def _loss_trend(run: Run, before, after, findings, skipped_steps=0) -> Outcome:
    """The training steps' own verdict, on the loss and on the Monitor findings no monitored
    item claims; the facts carry every finding to those items."""
    facts = run.facts.found(watched=tuple(findings))
    how = "train_step" if run.train_step is not None else "plain steps"
    summary = f"loss {_pair(before, after, ' -> ')} after {TRAIN_STEPS} {how}"
    claimed = CLAIMED_CODES + (ONE_BATCH_CODES if run.causal else ())
    others = [f for f in findings if f.code not in claimed]
    if math.isfinite(after) and after < before:
        return judged(summary, others, facts=facts)
    if skipped_steps >= TRAIN_STEPS and after == before:   # a GradScaler finding its scale
        return Outcome(SKIP if not others else status_of(others),
                       f"{summary}: the GradScaler skipped all {skipped_steps} steps (inf/NaN "
                       f"fp16 gradients while its scale comes down), nothing to judge",
                       tuple(others), facts=facts)
    chance = run.facts.uninformative_loss
    room = _room(before, chance)
    if not math.isfinite(after) or after - before > DIVERGING_SHARE * room:
        code, message = "LOSS_DIVERGING", (
            f"the loss rose from {_pair(before, after)}, more than {DIVERGING_SHARE:g} of its "
            f"room to progress ({room:.3g}{_room_words(chance)})")
        hint = "lower the learning rate; check the sign of the loss and of the update"
    elif after != before and chance is not None and before < TRAINED_SHARE * chance:
        return judged(f"{summary}: already trained (below {TRAINED_SHARE:g} of the "
                      f"{chance:.4g} of an uninformative output), a rise of "
                      f"{after - before:.2g}, small beside its room to progress "
                      f"({room:.3g}), is no divergence",
                      others, facts=facts)
    else:
        code, message = "LOSS_PLATEAU", (
            f"the loss did not move from {before:.4g}" if after == before else
            f"the loss did not go down ({_pair(before, after)})")
        hint = "check that optimizer.step() runs and that the learning rate is not 0"
    finding = Finding(code, "error", "loss", f"{message} in {TRAIN_STEPS} training steps",
                      hint, {"before": before, "after": after, "steps": TRAIN_STEPS,
                             "room": room, "uninformative_loss": chance})
    return Outcome(FAIL, summary, (finding, *others), facts=facts)


def _room(before, chance):
    """The loss's own scale of progress: how far it is from the uninformative output's loss
    (at least ``CHANCE_BAND`` of that loss, so a fresh model at chance has a scale), or, with
    no such loss, the loss's own size."""
    if chance is not None:
        return max(abs(chance - before), CHANCE_BAND * chance)
    return abs(before) if before != 0 else 1.0


def _room_words(chance):
    if chance is None:
        return ", the loss's own size"
    return f", from the {chance:.4g} of an uninformative output"


def _pair(before, after, between=" to "):
    """``before to after`` with enough digits to tell them apart (4 when they are equal)."""
    for digits in range(4, 13):
        a, b = f"{before:.{digits}g}", f"{after:.{digits}g}"
        if a != b:
            return f"{a}{between}{b}"
    return f"{before:.4g}{between}{after:.4g}" if before == after else \
        f"{before!r}{between}{after!r}"


def _slow_optimizer_finding(result, fallback, optimizer) -> Finding:
    """OVERFIT_FAILED as a warning: the user's optimizer cannot memorise the batch in time,
    the default Adam can, so the model and the loss learn and the settings are slow."""
    reached = ("reaches its target" if fallback.steps is not None
               else "comes down to the loss's own floor" if fallback.inconclusive
               else "is plainly memorising it" if fallback.stopped_at is not None
               else "is memorising it")
    steps = next((n for n in (fallback.steps, fallback.stopped_at) if n is not None),
                 fallback.max_steps)
    return Finding(
        "OVERFIT_FAILED", "warning", "loss",
        f"with your optimizer ({type(optimizer).__name__}, lr {T.lr_text(optimizer)}) the loss "
        f"went from {result.initial_loss:.4g} to {result.final_loss:.4g} in "
        f"{result.max_steps} steps without reaching {result.target_loss:.4g}; "
        f"Adam(lr={DEFAULT_LR:g}) on the same batch "
        f"{reached} in {steps} steps: the model and the loss can learn, the optimizer "
        f"settings are slow{T.rate_note(optimizer)}",
        "raise the learning rate (find_lr suggests one) or use Adam; then run preflight again",
        {"initial_loss": result.initial_loss, "final_loss": result.final_loss,
         "steps": result.max_steps, "learning_rates": T.base_rates(optimizer),
         "adam_steps": fallback.steps if fallback.steps is not None else fallback.stopped_at,
         "adam_final_loss": fallback.final_loss})


def step_equivalence(run: Run) -> Outcome:
    """``check_step_equivalence`` on the batch: does ``train_step`` apply loss_fn's gradient
    on the whole batch (accumulation, normalisation, rows fed)?"""
    if run.train_step is None:
        return skipped("give train_step to check that it applies loss_fn's gradient")
    if run.backend.name != "torch":
        return skipped("reads the gradient at a torch optimizer's step")
    inputs = run.batch.inputs
    if isinstance(inputs, tuple):
        return skipped("a model of several positional inputs: give them as a dict of keywords")
    result = check_step_equivalence(run.backend.model, run.batch.loss_fn, inputs,
                                    run.batch.targets, train_step=run.train_step,
                                    optimizer=run.optimizer)
    alarms = [finding for finding in result if finding.is_alarm]
    if alarms:
        return judged(first_line(alarms[0]), alarms)
    if not result.note:      # an info: the step could not be judged
        verdict = result[0]
        return skipped(verdict.message.removeprefix("not judged: "), [verdict])
    return passed(result.note)
