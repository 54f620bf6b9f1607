"""``overfit_one_batch``: can the model memorise one small batch?

A model that cannot memorise one small batch has a bug, not a tuning problem.
"""
import math
from dataclasses import dataclass, field

import numpy as np

from .. import outputs
from ..batch import first_parameter
from ..findings import Finding
from ..layouts import rows_coupled
from ..jsonable import to_jsonable
from ..monitor.checks.probabilities import bce_with_logits_floor, cross_entropy_floor
from ..monitor.kernels import kernels_for
from . import _training as T
from . import contexts, objective
from .next_token import scored_from

DEFAULT_LR = 3e-3
TARGET_FRACTION = 0.05  # default target: 5% of the starting (or uninformative) loss
# Short of the target, a run still passes when it is plainly memorising the batch: the loss
# fell to at most FALLEN_FRACTION of where it began, it is still falling (the median of the
# last SMOOTH losses at most FALLING_RATIO times that a quarter of the run earlier), every
# parameter got a gradient, and, for class indices, every example of the batch is right.
FALLEN_FRACTION = 0.2
FALLING_RATIO = 0.8
SMOOTH = 5
MIN_CURVE = 20          # losses needed to tell "still falling" from noise
DEFAULT_PATIENCE = 3    # more rounds of ``steps`` while the loss keeps falling:
EXTEND_RATIO = 0.9      # 10% lower than a quarter of the run earlier
# A loss whose forward samples (a VAE's reparameterisation, dropout) has a floor no step can
# remove: short of the target, the run is inconclusive (not failed) when the loss came down
# from its start to within NOISY_FRACTION of the way to the part of it the output cannot
# remove, every parameter learning.
NOISY_FRACTION = 0.2
ACCURACY_SLACK = 1e-9   # an accuracy this close to the best a batch allows is that best


@dataclass
class OverfitResult:
    """``passed``; ``steps`` optimizer steps taken to reach ``target_loss`` (None if never);
    ``floor``: the lowest loss the batch allows, which the target is measured from, and
    ``floor_reason`` when that is targets the model cannot tell apart (``contexts``);
    ``negative_loss``: failed on a loss below zero, which no cross-entropy can be;
    ``losses[i]`` and ``accuracies[i]`` measured before step ``i`` (``accuracies`` is None
    unless the targets are class indices); ``still_falling``: passed short of the target,
    the loss far down and still falling; ``inconclusive``: short of the target because the
    loss cannot get there by design (a floor of a sampling forward, or parameters that
    ``train_step`` trains against the loss), which says nothing about a bug: ``passed`` is
    True and ``findings`` holds an info OVERFIT_FAILED with the evidence; ``findings`` holds
    an error OVERFIT_FAILED on failure; ``stopped_at``: the step a run asked to stop once
    plainly memorising stopped at, short of the target (``run(stop_when_memorising=True)``)."""

    passed: bool
    steps: int | None
    target_loss: float
    losses: list
    accuracies: list | None
    max_steps: int
    findings: list = field(default_factory=list)
    still_falling: bool = False
    inconclusive: bool = False
    floor: float = 0.0
    floor_reason: str | None = None
    negative_loss: bool = False
    stopped_at: int | None = None

    @property
    def initial_loss(self):
        return self.losses[0]

    @property
    def final_loss(self):
        return self.losses[-1]

    def to_dict(self):
        return to_jsonable({
            "passed": self.passed, "steps": self.steps, "max_steps": self.max_steps,
            "still_falling": self.still_falling, "inconclusive": self.inconclusive,
            "target_loss": self.target_loss, "floor": self.floor,
            "floor_reason": self.floor_reason, "negative_loss": self.negative_loss,
            "stopped_at": self.stopped_at,
            "initial_loss": self.initial_loss,
            "final_loss": self.final_loss, "losses": self.losses,
            "accuracies": self.accuracies,
            "findings": [finding.to_dict() for finding in self.findings]})

    @property
    def headline(self):
        """``PASSED in 6 steps (loss 2.3 -> 0.1, target 0.11, accuracy 97%)``."""
        if self.negative_loss:
            verdict = f"FAILED at step {len(self.losses) - 1}, a loss that goes below zero"
        elif self.inconclusive:
            verdict = f"INCONCLUSIVE after {self.max_steps} steps"
        elif self.stopped_at is not None:
            verdict = f"PASSED, memorising: stopped at step {self.stopped_at}"
        elif self.still_falling:
            verdict = f"PASSED, still falling after {self.max_steps} steps"
        else:
            verdict = (f"PASSED in {self.steps} steps" if self.passed
                       else f"FAILED after {self.max_steps} steps")
        where = "above" if self.target_loss >= self.floor else "below"
        floor = (f" {where} the floor {self.floor:.4g} of targets the model cannot tell apart"
                 if self.floor_reason else "")
        return (f"{verdict} (loss {self.initial_loss:.4g} -> {self.final_loss:.4g}, target "
                f"{self.target_loss:.4g}{floor}"
                + (f", accuracy {self.accuracies[-1]:.0%})" if self.accuracies else ")"))

    def __str__(self):
        lines = [f"overfit one batch: {self.headline}",
                 "  loss curve: " + _curve_text(self.losses)]
        if self.floor_reason:
            lines.append(f"  floor: {self.floor:.4g}, as {self.floor_reason}: no model can go "
                         f"below it on this batch")
        lines.extend(f"  {line}" for finding in self.findings for line in str(finding).splitlines())
        return "\n".join(lines)


def overfit_one_batch(model, loss_fn, inputs, targets, *, optimizer=None, steps=200,
                      target_loss=None, patience=DEFAULT_PATIENCE, train_step=None, output=None):
    """Train on one batch until the loss reaches ``target_loss`` or ``steps`` steps pass;
    while the loss is still falling then (10% lower than a quarter of the run earlier), up to
    ``patience`` more rounds of ``steps`` (a small net memorises slowly, a broken one does not
    fall: the extra steps go only to runs that are getting there).

    ``optimizer`` defaults to Adam(lr=3e-3) over the model's parameters; ``target_loss``
    defaults to 5% of the way from the loss's floor to the loss at the start or of an
    all-zero output's loss (-log(1/C) for cross-entropy), whichever is lower; the floor is 0,
    or for class indices the lowest loss any logits reach (label smoothing keeps it above 0),
    or for float targets the loss with the targets as the output when no output nearby goes
    lower (a constant or KL term). Stops
    early on success. Short of the target, it
    passes when the batch is plainly being memorised: the loss down to 20% of its start and
    still falling (20% lower than a quarter of the run earlier), every parameter with a
    gradient, and every example right for class-index targets. A loss that cannot reach
    the target by design makes the run inconclusive, not failed (``OverfitResult.inconclusive``):
    a forward that samples, the loss most of the way down to the part of it the output cannot
    remove; or a ``train_step`` that trains other parameters against the loss, the loss
    memorised with them held still. The model, the optimizer and the RNG states are restored
    afterwards, bit for bit.

    ``train_step(model, (inputs, targets), optimizer)``: your own training step (its clipping,
    its scaler); given, each step runs through it. ``inputs`` may be a dict of keyword inputs;
    the model may return a tuple, dict or dataclass (``output=`` names the logits, see
    ``diagnostics.outputs``), which ``loss_fn`` gets whole.
    """
    backend, batch = T.checked_batch(model, loss_fn, inputs, targets, optimizer=optimizer,
                                     train_step=train_step, output=output)
    steps = T.check_int(steps, "steps", minimum=1)
    patience = T.check_int(patience, "patience", minimum=0)
    if target_loss is not None:
        target_loss = T.check_float(target_loss, "target_loss",
                                    expected="a finite number >= 0 or None",
                                    accept=lambda v: v >= 0)
    with backend.preserved(optimizer):
        return run(backend, batch, optimizer=optimizer, train_step=train_step, steps=steps,
                   target_loss=target_loss, patience=patience)


def run(backend, batch, *, optimizer, train_step=None, steps=200, target_loss=None,
        patience=DEFAULT_PATIENCE, stop_when_memorising=False):
    """The test on a checked ``batch``, at the optimizer's base rates (an LR scheduler's
    ``initial_lr``: a warm-up's first rate says nothing about the model); the caller restores
    the model and the optimizer. ``stop_when_memorising``: for class-index targets, stop and
    pass as soon as the batch is plainly being memorised (``_memorising``), short of the
    target: what a checklist needs to know, at a fraction of the steps on a model whose step
    is expensive; a failing run still runs to the cap, as it does without it."""
    optimizer = T.make_optimizer(backend, optimizer, lr=DEFAULT_LR)
    note = T.rate_note(optimizer)
    with T.at_base_rates(optimizer):
        return _run(backend, batch, optimizer=optimizer, train_step=train_step, steps=steps,
                    target_loss=target_loss, patience=patience, rate_note=note,
                    stop_when_memorising=stop_when_memorising)


def _run(backend, batch, *, optimizer, train_step, steps, target_loss, patience, rate_note,
         stop_when_memorising=False):
    opponents = objective.Opponents(backend, batch, optimizer, train_step)
    begin = _State(backend, optimizer) if opponents.watched else None
    step_once = T.stepper(backend, optimizer, batch, train_step)
    target_array = batch.target_array()
    losses, accuracies, silent = [], [], None
    reached, limit, step, base, stopped = None, steps, -1, 0.0, None
    while step < limit:
        step += 1
        if step == limit and patience and not silent and _falling(losses, EXTEND_RATIO, base):
            limit, patience = limit + steps, patience - 1
        if step == limit:  # the last measurement, without a step after it
            backend.zero_grad()
            with backend.no_grad():
                output, loss = batch.output_and_loss(backend)
            value = backend.scalar(loss)
        else:
            value, output = opponents.step(step, step_once)
        if step == 0:
            key = T.logits_key(backend, batch, output)
        logits = T.logits_array(backend, output, key)
        if step == 0:
            silent = _parameters_without_gradient(backend) if math.isfinite(value) else []
            start = _start_level(backend, batch, value, output, key, logits)
            floor = _loss_floor(backend, batch, output, key, logits, target_array)
            classes = T.class_axis_of(logits, target_array) is not None
            scored = _scored_inside(backend, batch, output, key, logits, target_array)
            base = floor.value if floor.value < start else 0.0   # what the loss can reach
            chosen = target_loss is not None
            if not chosen:
                target_loss = base + TARGET_FRACTION * (start - base)
            # "falling" is towards the floor of targets the model cannot tell apart, when the
            # target is measured from it; towards 0 for any other floor (a softmax applied
            # twice has one too) and for a target of the caller's
            base = base if floor.reason and not chosen else 0.0
        losses.append(value)
        accuracies.append(_accuracy(logits, target_array, scored))
        if classes and (value < 0 or (floor.unbounded and not _log_probabilities(
                logits, T.class_axis_of(logits, target_array)))):   # no -log p is negative
            return OverfitResult(
                passed=False, steps=None, target_loss=target_loss, losses=losses,
                accuracies=None if accuracies[0] is None else accuracies, max_steps=limit,
                negative_loss=True,
                findings=[_negative_loss_finding(losses, floor, optimizer, rate_note)])
        if value <= target_loss:
            reached = step
            break
        if not math.isfinite(value):
            break
        if (stop_when_memorising and classes and not chosen and not silent
                and _memorising(losses, start, base)):
            stopped = step
            break
    accuracies = None if accuracies[0] is None else accuracies
    falling = reached is None and stopped is None and not silent and _still_falling(
        losses, accuracies, start, floor, base)
    result = OverfitResult(passed=reached is not None or falling or stopped is not None,
                           steps=reached, target_loss=target_loss, losses=losses,
                           accuracies=accuracies, max_steps=limit, still_falling=falling,
                           floor=floor.value if floor.reason else 0.0, floor_reason=floor.reason,
                           stopped_at=stopped)
    if result.passed:
        return result
    broadcasts = _broadcasts(backend, batch, output, key, logits, target_array)
    learning = not silent and not broadcasts and all(math.isfinite(v) for v in losses)
    held = None
    if learning and opponents.against:   # the same optimizer, the opponent held still
        begin.restore()
        held = run(backend, batch, optimizer=optimizer, steps=steps, target_loss=target_loss,
                   patience=patience)
        note = _opponent_note(result, opponents, held)
    elif learning:
        final_floor = _loss_floor(backend, batch, output, key, logits, target_array)
        note = _noise_floor_note(backend, batch, result, start, final_floor)
    else:
        note = None
    if note is not None:
        result.passed = result.inconclusive = True
        result.findings = [note]
        return result
    result.findings = [_failure_finding(
        backend, optimizer, losses, accuracies, target_loss=target_loss, steps=limit,
        rate_note=rate_note + _floor_note(floor, chosen),
        silent=silent, output=logits, targets=target_array, broadcasts=broadcasts,
        opponent=None if held is None else _opponent_cause(opponents, held),
        squashed=_squashed_twice(backend, batch, logits, target_array, target_loss))]
    return result


_LABELS = "labels"   # _scored_inside: loss_fn reads the logits, the labels are the classes


def _scored_inside(backend, batch, output, key, logits, targets):
    """For class-index targets and a loss the model computes inside forward (``loss_fn`` only
    reads it out), the class that loss scores each position against (-1 where none), read
    once from its gradient on the logits: the labels' layout says nothing of how the model
    shifts or masks them (a causal LM scores logits[t] against labels[t + 1]). ``_LABELS``
    when ``loss_fn`` reads the logits itself or the gradient cannot be read (the labels'
    layout is then the best guess, as for any loss); None (no accuracy) when the gradient
    names no scored class."""
    axis = T.class_axis_of(logits, targets)
    if axis is None or key is T.NO_LOGITS:
        return _LABELS
    try:
        if outputs.loss_gradient(backend, batch.loss_fn, output, key, logits.copy(),
                                 batch.targets) is not None:
            return _LABELS
        grad, _ = outputs.model_loss_gradient(backend, batch, key)
    except Exception:  # noqa: BLE001  (the user's loss on a probe: the labels, as before)
        return _LABELS
    if grad is None:       # not read (a selector of the caller's, a loss not on the logits)
        return _LABELS
    for axis in dict.fromkeys((grad.ndim - 1, 1)):   # the loss's gradient tells the class
        moved = np.moveaxis(grad, axis, -1)          # axis: its entries sum to 0 along it
        scored = scored_from(moved.argmin(axis=-1), moved.min(axis=-1), np.abs(grad).max(),
                             np.abs(moved.sum(axis=-1)).max())
        if scored is not None and (scored >= 0).any():
            return _Scored(scored, axis)
    return None


@dataclass(frozen=True)
class _Scored:
    """The class each position is scored against (-1: unscored), and the logits' class axis."""

    classes: np.ndarray
    axis: int


def _accuracy(logits, targets, scored):
    """The share of scored positions whose argmax is the class they are scored against."""
    if scored is _LABELS:
        return T.accuracy(logits, targets)
    if scored is None or logits is None:
        return None
    right = np.argmax(logits, axis=scored.axis) == scored.classes
    return float(right[scored.classes >= 0].mean())


def _squashed_twice(backend, batch, logits, targets, target_loss):
    """The cause when the loss's graph applies a softmax (sigmoid) to what cross-entropy (BCE
    with logits) squashes again: a floor above the target, whatever the steps. None when the
    graph shows no such chain (or the forward or the loss raises here)."""
    try:
        with backend.enable_grad():
            _, loss = batch.output_and_loss(backend)
        found = kernels_for(backend).squashed_twice(loss)
    except Exception:  # the user's code on one more forward: no evidence either way
        return None
    if not found:
        return None
    chain, squash, _ = found[0]
    graph = " <- ".join(chain)
    if squash == "Softmax":
        axis = T.class_axis_of(logits, targets) if logits is not None else None
        classes = None if axis is None else int(logits.shape[axis])
        floor = (f", and cross-entropy cannot go below ln(e + C - 1) - 1 = "
                 f"{cross_entropy_floor(classes):.4g} for C = {classes}" if classes else "")
        return (f"the softmax is applied twice (the loss's graph: {graph}): nn.CrossEntropyLoss "
                f"applies log-softmax itself{floor} (the target is {target_loss:.4g}); remove "
                f"the softmax from the model and give the loss the logits")
    return (f"the sigmoid is applied twice (the loss's graph: {graph}): BCEWithLogitsLoss "
            f"applies its own, and an element cannot go below {bce_with_logits_floor(1):.4g} "
            f"(target 1) or ln 2 = {bce_with_logits_floor(0):.4g} (target 0); remove the "
            f"sigmoid from the model and give the loss the logits")


class _State:
    """The model and the optimizer as a run found them, to run again from there."""

    def __init__(self, backend, optimizer):
        self.backend, self.optimizer = backend, optimizer
        self.model = backend.snapshot()
        self.moments = backend.optimizer_snapshot(optimizer)

    def restore(self):
        self.backend.restore(self.model)
        self.backend.optimizer_restore(self.optimizer, self.moments)


def _opponent_note(result, opponents, held):
    """An info OVERFIT_FAILED when ``train_step`` trains other parameters against the loss
    (their update raised it at most measured steps) and, with them held still (``held``: plain
    steps of the same optimizer from the same start), the loss is memorised; else None."""
    if not held.passed or held.inconclusive:
        return None
    found = opponents.evidence()
    how = (f"reaches {held.target_loss:.4g} in {held.steps} steps" if held.steps is not None
           else f"is memorising it (down to {held.final_loss:.4g}, still falling)")
    message = (
        f"not judged: train_step also trains {_names(found['parameters'])} (outside your "
        f"optimizer) against this loss: their update raised it at {found['raised_at']} of "
        f"{found['measured_steps']} measured steps (by {found['mean_effect']:.3g} on average), "
        f"and the loss went from {result.initial_loss:.4g} to {result.final_loss:.4g} in "
        f"{result.max_steps} steps; with them held still it {how}: an adversarial objective "
        f"(a GAN's) cannot reach 0 on one batch")
    return _not_judged(
        result, message,
        "nothing to fix if the other network is trained against this one by design; "
        "overfit_one_batch without train_step (this side's optimizer) tests this side alone",
        opponent=found, held_still_steps=held.steps, held_still_final_loss=held.final_loss)


def _opponent_cause(opponents, held):
    """The likely cause when the loss fails even with the opponent held still."""
    return (f"train_step also trains {_names(opponents.moved)} against this loss, but with "
            f"them held still it still went only from {held.initial_loss:.4g} to "
            f"{held.final_loss:.4g}: this side does not learn either")


def _noise_floor_note(backend, batch, result, start, found):
    """An info OVERFIT_FAILED when the loss has a floor no step removes: the same batch at the
    same parameters gives different losses (the forward samples), and the loss (the median of
    its last SMOOTH) came down from its start to within NOISY_FRACTION of the way to
    ``found``'s floor (a ``_Floor``: the part the output cannot remove), the batch right as far
    as any model gets it for class indices; else None. The run already went on while the loss
    kept falling (``patience``)."""
    losses, accuracies = result.losses, result.accuracies
    if accuracies is not None and accuracies[-1] < found.best_accuracy - ACCURACY_SLACK:
        return None
    floor = found.value if found.value < start else 0.0
    level = float(np.median(losses[-SMOOTH:]))
    if level - floor > NOISY_FRACTION * (start - floor):
        return None
    draws = objective.loss_draws(backend, batch)
    if not objective.samples(draws):
        return None
    low, high = min(draws), max(draws)
    share = (start - level) / (start - floor)
    fixed = (f", and {floor:.4g} of it does not depend on the output (a KL or regularisation "
             f"term)" if floor > 0 else "")
    message = (
        f"not judged: this loss cannot reach {result.target_loss:.4g} on one batch by design: "
        f"the same parameters give losses from {low:.4g} to {high:.4g} on it (the forward "
        f"samples: reparameterisation noise, dropout){fixed}; it fell from {start:.4g} to "
        f"{level:.4g}, {share:.0%} of the way down to {floor:.4g}")
    return _not_judged(
        result, message,
        "nothing to fix if the sampling is by design (a VAE); to test memorisation, overfit "
        "with it off (the mean instead of a sample, no dropout) and the fit term alone",
        start_level=start, level=level, floor=floor, draws=draws)


def _not_judged(result, message, suggestion, **evidence):
    """The info OVERFIT_FAILED of an inconclusive run: the run's losses, then ``evidence``."""
    return Finding(
        "OVERFIT_FAILED", "info", "loss", message, suggestion,
        {"initial_loss": result.initial_loss, "final_loss": result.final_loss,
         "target_loss": result.target_loss, "steps": result.max_steps, **evidence})


def _still_falling(losses, accuracies, start, floor, base):
    """The loss far below its start (most of the way down to ``base``, the floor it can
    reach) and still going down, and (class indices) the batch right as far as any model gets
    it (``floor``, a ``_Floor``): memorising, only slower than the target asks."""
    if accuracies is not None and accuracies[-1] < floor.best_accuracy - ACCURACY_SLACK:
        return False
    return _memorising(losses, start, base)


def _memorising(losses, start, base):
    """The loss (median of the last SMOOTH) at most FALLEN_FRACTION of the way from ``base``
    (the floor it can reach) to its start, and still falling (FALLING_RATIO): a batch that is
    being memorised, which no model that cannot learn it (a cut graph, a floor above the
    target: a softmax applied twice, a broadcast, a learning rate of 0) gets to."""
    return (_falling(losses, FALLING_RATIO, base)
            and float(np.median(losses[-SMOOTH:])) - base <= FALLEN_FRACTION * (start - base))


def _falling(losses, ratio, base=0.0):
    """The median of the last SMOOTH losses, above ``base`` (the floor the loss can reach), at
    most ``ratio`` times that a quarter of the run earlier (every loss finite, at least
    MIN_CURVE of them)."""
    if len(losses) < MIN_CURVE or not all(math.isfinite(v) for v in losses):
        return False
    quarter = len(losses) // 4
    now = float(np.median(losses[-SMOOTH:]))
    earlier = float(np.median(losses[-quarter - SMOOTH:-quarter]))
    return now - base <= ratio * (earlier - base)


def _start_level(backend, batch, initial, output, key, logits):
    """The lower of the initial loss and an uninformative (all-zero) output's loss, so that a
    blown-up initial loss makes neither the target nor "far down" easy."""
    levels = [v for v in (initial, T.uninformative_loss(backend, batch, output, key, logits))
              if v is not None]
    finite = [v for v in levels if math.isfinite(v)]
    return min(finite) if finite else 0.0


FLOOR_SCALES = np.linspace(0.0, 40.0, 161)   # confidence of the ideal logits tried


@dataclass(frozen=True)
class _Floor:
    """What the loss allows on this batch: ``value``, the lowest loss any output reaches (at
    least 0); ``probes``, the loss at the ideal logits by confidence (class indices; a loss
    that keeps falling below 0 there has no floor: it is no log-likelihood); ``shared``, the
    targets the model cannot tell apart (``contexts.SharedContexts``) or None;
    ``best_accuracy``, the highest share of the batch any model gets right."""

    value: float = 0.0
    probes: dict = field(default_factory=dict)
    shared: object = None
    best_accuracy: float = 1.0

    @property
    def reason(self):
        return None if self.shared is None else self.shared.reason

    @property
    def unbounded(self):
        """The ideal logits' loss below 0 and falling as their confidence grows."""
        values = list(self.probes.values())
        return len(values) >= 2 and values[-1] < 0 and values[-1] < values[0]


def _loss_floor(backend, batch, output, key, logits, targets):
    """The lowest loss any logits reach on this batch (a ``_Floor``), for class-index targets:
    the loss of the best logits a model can give, minimised over their confidence ``k``:
    ``k * one_hot(targets)``, or, where positions the model cannot tell apart carry different
    targets (``contexts``), the same logits for all of them, ``k + log`` of each target's share
    (the floor is then the entropy of the targets given what the model sees). 0 for plain
    cross-entropy on a batch a model can memorise; above 0 for a loss with a floor (label
    smoothing: the entropy of the smoothed targets, 0.35 for 0.1 over 4 classes), which no
    model can go below. For float targets of the logits' shape, the loss at logits equal to
    the targets when no logits nearby go lower (``objective.ideal_floor``: a constant, a KL
    term). 0 when it cannot be measured."""
    axis = T.class_axis_of(logits, targets)
    if axis is None:
        return _Floor(objective.ideal_floor(backend, batch, output, key, logits, targets))
    classes = logits.shape[axis]
    valid = (targets >= 0) & (targets < classes)
    shared = contexts.shared_contexts(backend, batch, targets, valid)
    if shared is None:
        hot = np.zeros_like(logits)
        index = np.expand_dims(np.where(valid, targets, 0), axis)
        np.put_along_axis(hot, index, 1.0, axis=axis)

        def ideal_at(scale):
            return hot * scale
        accuracy = 1.0
    else:
        def ideal_at(scale):
            shared_logits = contexts.group_logits(shared.groups, targets, valid, classes, scale)
            return np.moveaxis(shared_logits, -1, axis).astype(logits.dtype)
        accuracy = contexts.best_accuracy(shared.groups, targets, valid)
    probes = {}
    try:
        for scale in FLOOR_SCALES:
            ideal = backend.from_numpy(ideal_at(scale), like=first_parameter(backend))
            with backend.no_grad():
                probes[float(scale)] = backend.scalar(
                    batch.loss(outputs.replace(output, key, ideal)))
    except Exception:  # a loss that cannot take these logits: no floor known
        return _Floor()
    best = min(probes.values())
    value = max(best, 0.0) if math.isfinite(best) else 0.0
    return _Floor(value, probes, shared, accuracy)


def _floor_note(floor, chosen):
    """The clause a failure adds about a floor of targets the model cannot tell apart."""
    if not floor.reason:
        return ""
    if chosen:
        return (f"; no model goes below {floor.value:.4g} on this batch, as {floor.reason}: "
                f"a target_loss under it cannot be reached")
    return f"; the target is measured from this batch's floor {floor.value:.4g}, as {floor.reason}"


def _log_probabilities(logits, axis):
    """True when ``logits`` (ndarray) are log-probabilities along ``axis`` (log_softmax's
    output: their exponentials sum to 1), which a loss may take as they are."""
    with np.errstate(all="ignore"):
        peak = np.max(logits, axis=axis, keepdims=True)
        total = np.log(np.sum(np.exp(logits - peak), axis=axis)) + np.squeeze(peak, axis)
    return bool(np.all(np.abs(total) <= 1e-3))


def _negative_loss_finding(losses, floor, optimizer, rate_note):
    """The error OVERFIT_FAILED of a class-index loss below zero, or of one that confident
    outputs take below zero (``floor.unbounded``) while the model's are no log-probabilities:
    -log p is never negative, so the loss is not a cross-entropy of these outputs (NLLLoss fed
    scores or probabilities takes them for log-probabilities and rewards them without bound),
    and no memorising is judged on it."""
    step, value = len(losses) - 1, losses[-1]
    where = (f"the loss is {value:.4g} at step {step}, below zero" if value < 0
             else f"the loss ({value:.4g} at step {step}) goes below zero for confident outputs")
    if floor.unbounded:
        low, high = min(floor.probes), max(floor.probes)
        probe = (f"; it keeps falling as the target class's score grows ("
                 f"{floor.probes[low]:.4g} at score {low:g}, {floor.probes[high]:.4g} at "
                 f"score {high:g}) instead of levelling off at 0")
        cause = ("nn.NLLLoss (F.nll_loss) given raw scores or probabilities instead of "
                 "log_softmax output: it takes them for log-probabilities")
    else:
        probe, cause = "", "a term of the loss below zero (a bonus subtracted from it?)"
    return Finding(
        "OVERFIT_FAILED", "error", "loss",
        f"{where}, which no correct cross-entropy or negative log-likelihood of class targets "
        f"can be (-log p >= 0){probe}; likely: {cause}" + rate_note,
        "end the model with log_softmax before nn.NLLLoss, or give nn.CrossEntropyLoss the "
        "raw logits (it applies log-softmax itself); then run overfit_one_batch again",
        {"initial_loss": losses[0], "final_loss": value, "negative_at": step,
         "learning_rates": T.base_rates(optimizer),
         "ideal_logit_losses": ({scale: floor.probes[scale] for scale in (0.0, 1.0, 10.0, 40.0)
                                 if scale in floor.probes} if floor.unbounded else None)})


def _parameters_without_gradient(backend):
    """Trainable parameters whose gradient after the first backward is missing or all zero."""
    silent = []
    for name, param in backend.named_parameters():
        if not param.requires_grad:
            continue
        grad = backend.read_gradient(name)
        if grad is None or not np.any(grad):
            silent.append(name)
    return silent


def _broadcasts(backend, batch, output, key, logits, targets):
    """Float targets of another shape than the logits that the loss compares across examples
    (``layouts.rows_coupled``); a loss that squeezes or reshapes by itself is trusted."""
    if (logits is None or targets is None or targets.dtype.kind != "f"
            or logits.shape == targets.shape):
        return False
    try:
        return rows_coupled(backend, batch.loss_fn, output, key, logits, targets)
    except Exception:  # the user's loss on a probe: no evidence of a broadcast
        return False


def _failure_finding(backend, optimizer, losses, accuracies, *, target_loss, steps, rate_note,
                     silent, output, targets, broadcasts, opponent=None, squashed=None):
    causes = _likely_causes(backend, optimizer, losses, silent=silent, output=output,
                            targets=targets, broadcasts=broadcasts)
    if opponent:   # the loss grew because of the opponent: say first that this side is stuck
        causes = [opponent] + [c for c in causes if not c.startswith("the loss grew")]
    if squashed:   # a floor by construction: not a matter of more steps or a larger lr
        causes = [squashed] + [c for c in causes if not c.startswith(("the loss fell",
                                                                       "the loss barely"))]
    finite = [v for v in losses if math.isfinite(v)]
    evidence = {"initial_loss": losses[0], "final_loss": losses[-1],
                "best_loss": min(finite) if finite else None, "target_loss": target_loss,
                "steps": steps, "learning_rates": T.base_rates(optimizer),
                "parameters_without_gradient": silent, "likely_causes": causes}
    if accuracies:
        evidence["final_accuracy"] = accuracies[-1]
    message = (f"the loss went from {losses[0]:.4g} to {losses[-1]:.4g} in {len(losses) - 1} "
               f"steps without reaching {target_loss:.4g}; likely: " + "; ".join(causes)
               + rate_note)
    return Finding("OVERFIT_FAILED", "error", "loss", message,
                   "fix the first likely cause, then run overfit_one_batch again", evidence)


def _likely_causes(backend, optimizer, losses, *, silent, output, targets, broadcasts):
    """Causes in the order to check them, from the loss curve and what the first step saw."""
    causes = []
    trainable = [n for n, p in backend.named_parameters() if p.requires_grad]
    frozen = _frozen_text(backend)
    if frozen:
        causes.append(frozen)
    if not math.isfinite(losses[-1]):
        causes.append(f"the loss became {losses[-1]} at step {len(losses) - 1}: learning rate "
                      f"too high, or a log/division of zero in the model or loss")
    if silent and len(silent) == len(trainable):
        causes.append("no parameter receives a gradient (a .detach(), a non-differentiable "
                      "step, all units dead, or requires_grad=False)")
    elif silent:
        causes.append(f"no gradient reaches {_names(silent)} (dead units upstream, a .detach(), "
                      f"or an unused layer)")
    if broadcasts:
        causes.append(f"output shape {output.shape} and target shape {targets.shape} differ; "
                      f"the loss broadcasts them and cannot reach zero")
    finite = [v for v in losses if math.isfinite(v)]
    if finite and math.isfinite(losses[-1]):
        start, end = finite[0], finite[-1]
        if end > start:
            causes.append("the loss grew: the learning rate is too high")
        elif start - end <= 0.01 * max(abs(start), 1e-12):
            causes.append(f"the loss barely moved: a learning rate of "
                          f"{T.lr_text(optimizer)} may be too small, or optimizer.step() does "
                          f"not change the parameters")
        else:
            causes.append("the loss fell but too slowly: more steps or a larger learning rate, "
                          "or a model too small to memorise the batch")
    regularisers = _regularisers(backend, optimizer)
    if regularisers:
        causes.append("regularisation fights the fit (" + ", ".join(regularisers) + ")")
    return causes


def _frozen_text(backend):
    """``"12,800 of 12,947 parameters are frozen (requires_grad=False): 0.weight, ..."``, or
    None when every parameter trains."""
    params = backend.named_parameters()
    frozen = [name for name, p in params if not p.requires_grad]
    if not frozen:
        return None
    size = {name: int(np.prod(tuple(p.shape))) for name, p in params}
    return (f"{sum(size[n] for n in frozen):,} of {sum(size.values()):,} parameters are frozen "
            f"(requires_grad=False): {_names(frozen)}; unfreeze the layers meant to learn")


def _regularisers(backend, optimizer):
    found = [f"dropout in train mode at {name}" for name, module in backend.named_modules()
             if "Dropout" in type(module).__name__ and module.training
             and getattr(module, "p", 0) > 0]
    decays = [group.get("weight_decay", 0) for group in optimizer.param_groups]
    if any(decays):
        found.append(f"weight_decay={max(decays):g}")
    return found


def _names(names, limit=4):
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _curve_text(losses, points=6):
    """A few (step, loss) samples from a curve, evenly spaced, the last one included."""
    indices = sorted(set(np.linspace(0, len(losses) - 1, min(points, len(losses))).astype(int)))
    return ", ".join(f"{i}: {losses[i]:.4g}" for i in indices)
