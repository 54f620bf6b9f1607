"""Loss health: NaN, divergence, oscillation, plateau, and a loss stuck at the uniform guess.

The shape of the loss (its trend, swings, level) is judged only when this optimizer is the
one moving it. A loss that depends on tensors another optimizer keeps changing (a GAN: the
generator's loss runs through the discriminator, the discriminator's is measured on what the
generator makes; ``probes/other_optimizer.py``) is a moving target: it hovers around the
game's equilibrium, and rises when the other player gets better, by design. Its shape is not
judged then; a NaN loss still is, as are the gradients, updates and activations.

The ratios behind divergence, oscillation and plateau (a level twice an earlier one, a swing
of half the level, a change of 1% of it) presume a loss whose floor is 0: cross-entropy, MSE,
BCE, NLL of labels. A loss that has been below 0 has no such floor: a policy-gradient
surrogate ``-sum(log pi(a|s) * advantage)`` (its value hovers around 0 and rises and falls
with the batch's returns while the reward climbs), a Gaussian NLL, a contrastive score. For
it only a rise far beyond the loss's own spread is divergence; its swings and level are not
judged.
"""
import math

import numpy as np

from ...findings import Finding
from ..history import LEVEL_STEPS
from ..probes.optimizer_eps import EpsUnderflow
from ..probes.other_optimizer import TrainedElsewhere
from ..probes.travel import WeightTravel
from .advice import clip_gradients, lower_learning_rate


def nan_loss(view):
    first = view.first_nonfinite_step
    if first is None:
        return []
    value = float(view.losses[first])
    last_finite = float(view.losses[first - 1]) if first > 0 else None
    return [Finding(
        "NAN_LOSS", "error", "loss",
        f"the loss became {value} at step {first}"
        + (f" (it was {last_finite:.4g} the step before)" if last_finite is not None else ""),
        _eps_first(view) + f"{lower_learning_rate(view)}; {clip_gradients(view)}; look for "
        f"log(0) or a division by zero in the loss (use log_softmax/cross_entropy rather than "
        f"log(softmax), add an eps to divisions)",
        {"step": first, "value": value, "last_finite_loss": last_finite,
         "learning_rate": view.learning_rate})]


def _eps_first(view):
    """An optimizer eps the parameters' dtype rounds to 0 divides by zero: the likelier cause,
    so it leads the advice (EPS_UNDERFLOWS says why)."""
    underflow = view.signal(EpsUnderflow)
    if underflow is None or not underflow.lost:
        return ""
    lost = underflow.lost
    return (f"first raise the optimizer's eps ({lost[0].eps:g} is "
            f"{lost[0].value:g} in {lost[0].dtype}, see EPS_UNDERFLOWS); then ")


def loss_diverging(view):
    """The loss grows within the window, climbed far back from the best level it reached, ends
    above where it began, or, for a classifier, ends above the uniform guess it started from:
    training is making the model worse."""
    levels = view.loss_levels
    if levels is None or moving_target(view):
        return []
    if below_zero(view):
        return _signed_diverging(view, levels)
    initial, then, now = levels.initial, levels.then, levels.now
    chance, best = view.chance_loss, view.best_loss_level
    factor = view.thresholds.diverging_factor
    # a level of exactly 0 is no scale to grow from: a loss that is exactly 0 at most steps
    # carries no signal there (a sparse reward, a satisfied margin), no float loss is 0
    if then > 0 and now > factor * then and now > initial:
        reason = f"grew from {then:.4g} to {now:.4g} over the last {levels.steps} steps"
    elif (best is not None and now > factor * best and now - best > 0.1 * abs(initial)
          and now - best > view.thresholds.diverging_rebound_share * (initial - best)):
        reason = (f"climbed back to {now:.4g} after reaching {best:.4g} (the best median of "
                  f"{LEVEL_STEPS} steps)")
    elif initial > 0 and now > 1.5 * initial:
        reason = f"is at {now:.4g}, {now / initial:.2g} times its first value ({initial:.4g})"
    elif (chance is not None and now > initial
          and now > (1 + 2 * view.thresholds.chance_tolerance) * chance):
        reason = (f"is at {now:.4g}, above its first value ({initial:.4g}) and above the "
                  f"{chance:.4g} of a uniform guess over {view.output_width} classes")
    else:
        return []
    return [_diverging(view, levels, reason, best=best, chance=chance)]


def _signed_diverging(view, levels):
    """A loss without a floor at 0: diverging only when the recent median rose above the
    earlier one by ``signed_diverging_spread`` times the earlier quarter's spread."""
    quarter = max(levels.steps // 4, 2)
    earlier = levels.recent[:quarter]
    spread = float(np.median(np.abs(earlier - np.median(earlier))))
    limit = view.thresholds.signed_diverging_spread
    if spread == 0:     # the same value at most earlier steps (0 from a sparse reward): no
        return []       # signal there, and no scale to measure a rise by
    if not levels.now - levels.then > limit * spread:
        return []
    reason = (f"grew from {levels.then:.4g} to {levels.now:.4g} over the last {levels.steps} "
              f"steps, more than {limit:g} times its earlier spread ({spread:.3g})")
    return [_diverging(view, levels, reason, best=view.best_loss_level,
                       chance=view.chance_loss)]


def _diverging(view, levels, reason, *, best, chance):
    return Finding(
        "LOSS_DIVERGING", "error", "loss",
        f"the loss {reason}: the steps make the model worse",
        f"{lower_learning_rate(view)}; {clip_gradients(view)}; check the learning-rate "
        f"schedule (a warm-up that overshoots)",
        {"initial": levels.initial, "earlier": levels.then, "recent": levels.now,
         "best_level": best, "steps": levels.steps, "chance_loss": chance,
         "learning_rate": view.learning_rate})


def loss_oscillating(view):
    """No progress over the window while the loss swings widely around its level, or flips
    direction almost every step."""
    levels = view.loss_levels
    if levels is None or moving_target(view) or below_zero(view):
        return []
    recent, then, now = levels.recent, levels.then, levels.now
    level = float(np.median(recent))
    thresholds = view.thresholds
    if level <= 0 or then == 0 or now < 0.5 * abs(levels.initial):
        return []   # a loss far below where it began is converging, not oscillating
    progress = (then - now) / abs(then)
    swing, flips, step_size = _swings(recent, level)
    if (progress > thresholds.plateau_progress or now > thresholds.diverging_factor * abs(then)
            or not _is_swinging(swing, flips, step_size, thresholds)):
        return []
    return [Finding(
        "LOSS_OSCILLATING", "warning", "loss",
        f"the loss swings by {swing:.0%} around {level:.4g} (direction changes in {flips:.0%} "
        f"of the steps) over the last {levels.steps} steps without going down",
        f"{lower_learning_rate(view)}; a larger batch; a learning-rate decay schedule; with "
        f"Adam, a lower lr",
        {"relative_swing": swing, "direction_changes": flips, "relative_step": step_size,
         "level": level, "earlier": then, "recent": now, "learning_rate": view.learning_rate})]


def loss_plateau(view):
    """The loss level stays within ``plateau_change`` across the window, near where it started,
    not swinging, and the weights stalled with it: a model whose weights travelled at least
    ``plateau_travel`` of their norm during the window is in a phase of training (terms of the
    loss trading off), not stuck. Without a measure of the weights, the loss alone judges."""
    levels = view.loss_levels
    if (levels is None or not levels.beyond_start or moving_target(view)
            or below_zero(view)):
        return []
    initial, then, now = levels.start, levels.then, levels.now
    if then == 0 or initial == 0:
        return []
    change = abs(now - then) / abs(then)
    progress = (initial - now) / abs(initial)
    thresholds = view.thresholds
    if change > thresholds.plateau_change or abs(progress) > thresholds.plateau_progress:
        return []   # moving, or far from where it started (down: learned; up: diverged)
    level = float(np.median(levels.recent))
    if level > 0 and _is_swinging(*_swings(levels.recent, level), thresholds):
        return []   # a level that swings is LOSS_OSCILLATING (lower the lr), not a plateau
    travel = _travel_in_window(view, levels)
    if travel is not None and travel.ratio >= thresholds.plateau_travel:
        return []   # the weights moved far while the loss held level: not a stall
    frozen, unfreeze = _frozen(view)
    return [Finding(
        "LOSS_PLATEAU", "warning", "loss",
        f"the loss has stayed at {now:.4g} for the last {levels.steps} steps, "
        f"{progress:.1%} below where it started ({initial:.4g})" + frozen,
        unfreeze + "raise the learning rate (diagnostics.find_lr(model, loss_fn, train_loader) "
        "suggests one); check "
        "that the data and labels are what you think (shuffled or misaligned labels); check "
        "that gradients reach every layer and that optimizer.step() changes the weights; "
        "check that examples do not mix (check_batch_independence(model, inputs))",
        {"start": initial, "earlier": then, "recent": now, "relative_change": change,
         "progress": progress, "steps": levels.steps,
         "weight_travel": travel.ratio if travel is not None else None,
         "weight_travel_steps": [travel.since, travel.until] if travel is not None else None,
         "learning_rate": view.learning_rate})]


def _travel_in_window(view, levels):
    """The ``WeightTravel`` of the trainable weights from a mark inside the window of
    ``levels`` to a later step (``probes/travel.py``); None without such a measure."""
    travel = view.signal(WeightTravel)
    first = view.step - levels.steps - 1    # the weights the window's first step started from
    if (travel is None or travel.since < first or not travel.until > travel.since
            or not math.isfinite(travel.ratio)):
        return None
    return travel


def loss_at_chance(view):
    """The loss sits at -log(1/C) and the predictions are near-uniform: the model learned
    nothing. A confident model whose loss happens to be near ln C (a few mistakes with
    large logits) has a low softmax entropy and is not at chance; and a cross-entropy near
    ln C on labels the model cannot predict implies near-uniform predictions."""
    chance = view.chance_loss
    levels = view.loss_levels
    if chance is None or levels is None or not levels.beyond_start or moving_target(view):
        return []
    entropy = view.prediction_entropy
    if entropy is None or entropy < view.thresholds.chance_entropy * chance:
        return []
    then, now = levels.then, levels.now
    tolerance = view.thresholds.chance_tolerance
    still_falling = then - now > view.thresholds.plateau_change * chance
    if abs(now - chance) > tolerance * chance or still_falling:
        return []
    best = view.best_loss_level
    if best is not None and best < (1 - 2 * tolerance) * chance:
        return []   # it learned once, then lost it: LOSS_DIVERGING tells that story
    width = view.output_width
    frozen, unfreeze = _frozen(view)
    return [Finding(
        "LOSS_AT_CHANCE", "warning", "loss",
        f"the loss sits at {now:.4g}, the cross-entropy of a uniform guess over {width} "
        f"classes (-log(1/{width}) = {chance:.4g}), after {view.step} steps, and the "
        f"predictions are near-uniform (softmax entropy {entropy:.4g} of at most {chance:.4g})"
        + frozen,
        unfreeze + "check that labels belong to their inputs (a shuffle applied to x but not y, "
        "a wrong column, labels offset by one); check that the model can overfit one batch "
        "(gradhunt preflight); if it can, check that examples do not mix (check_batch_independence("
        "model, inputs): a view or reshape that moves the batch axis lets one batch be "
        "memorised and nothing be learned); raise the learning rate; check that the output "
        "layer's width is the number of classes",
        {"loss": now, "chance_loss": chance, "prediction_entropy": entropy, "classes": width,
         "steps": view.step})]


def _frozen(view):
    """``(message tail, suggestion head)`` naming the freeze when at least ``frozen_share`` of
    the model's parameter values have requires_grad=False; ``("", "")`` otherwise."""
    params = view.layout.params if view.layout is not None else []
    total = sum(p.numel for p in params)
    frozen = [p for p in params if not p.trainable]
    count = sum(p.numel for p in frozen)
    if not total or count < view.thresholds.frozen_share * total:
        return "", ""
    names = ", ".join(p.name for p in frozen[:3]) + (", ..." if len(frozen) > 3 else "")
    return (f"; {count / total:.1%} of the model's {total:,} parameter values are frozen "
            f"(requires_grad=False: {names}), so only the rest can learn",
            "if the freeze is not on purpose, unfreeze them (model.requires_grad_(True)) "
            "before building the optimizer; ")


def moving_target(view):
    """Tensors the loss depends on that another optimizer keeps changing (the model's parameters
    outside this optimizer, or leaves of the loss's graph): the loss is not this optimizer's
    alone to move, so a level, rising or swinging loss says nothing of its progress."""
    elsewhere = view.signal(TrainedElsewhere)
    return elsewhere is not None and bool(elsewhere.names)


def below_zero(view):
    """The loss has been below 0 at some step: it has no floor at 0, so ratios to its level
    say nothing."""
    losses = view.losses
    return bool(np.any(losses[np.isfinite(losses)] < 0))


def _swings(recent, level):
    """(median swing around ``level``, share of direction changes, median step), relative."""
    jumps = np.diff(recent)
    swing = float(np.median(np.abs(recent - level))) / level
    flips = float(np.mean(np.sign(jumps[1:]) != np.sign(jumps[:-1])))
    step_size = float(np.median(np.abs(jumps))) / level
    return swing, flips, step_size


def _is_swinging(swing, flips, step_size, thresholds):
    """Wide swings, or a direction change almost every step with steps of 5% or more."""
    return swing >= thresholds.oscillation_amplitude or (flips >= 0.8 and step_size >= 0.05)


CHECKS = (nan_loss, loss_diverging, loss_oscillating, loss_plateau, loss_at_chance)
