"""Probabilities as logits: a softmax at the end of the model, then ``nn.CrossEntropyLoss``.

Cross-entropy applies log-softmax to what it is given. Given probabilities ``p`` (entries in
[0, 1], rows summing to 1) instead of logits, its loss is ``log(sum_j e^p_j) - p_y``, which is
smallest when ``p`` is the one-hot target: ``ln(e + C - 1) - 1`` for C classes (1.461 for
C = 10), far above 0, and its gradient is squashed by the softmax applied twice, so training
is slow and stalls. Given to ``nn.NLLLoss``, which expects log-probabilities, the loss is
``-p[y]``: negative, and linear in the probabilities. The probe measured the output's rows
and the loss's gradient on them.
"""
import math

import numpy as np

from ...findings import Finding

SIMPLEX_TOLERANCE = 2e-3   # |row sum - 1| and -min(entry) of a float16 softmax stay below this
MISFIT_TOLERANCE = 1e-2    # cross-entropy's own gradient fits to float rounding (about 1e-6)
MIN_SAMPLES = 2            # sampled steps that show it


def cross_entropy_floor(classes):
    """The lowest cross-entropy possible when its input is a probability vector over
    ``classes`` classes: the one-hot target itself as the input."""
    return math.log(math.e + classes - 1) - 1


def probabilities_as_logits(view):
    records = view.signals.get("probabilities") or []
    fitting = [r for r in records if _simplex(r) and _fits(r)]
    contrary = [r for r in records if _simplex(r) and r.misfit is not None and not _fits(r)]
    if len(fitting) < MIN_SAMPLES or contrary:
        return []
    record = fitting[-1]
    classes = record.classes
    floor, chance = cross_entropy_floor(classes), math.log(classes)
    losses = view.losses[[math.isfinite(v) for v in view.losses]] if view.losses.size else []
    if len(losses) == 0:
        return []
    lowest, first, now = float(min(losses)), float(losses[0]), float(losses[-1])
    if lowest < floor * (1 - 1e-3) - 1e-6:   # a loss that goes below it is not this one alone
        return []
    return [Finding(
        "PROBABILITIES_AS_LOGITS", "error", _softmax_layer(view),
        f"the model's output is already probabilities (entries >= 0, each row summing to 1 over "
        f"its {classes} classes on axis {record.axis}: a softmax at the end of the model) and "
        f"the loss's gradient on it is exactly that of cross-entropy taking it as logits "
        f"(softmax(output) - one-hot, in {len(fitting)} sampled steps): nn.CrossEntropyLoss "
        f"applies log-softmax itself, so the softmax is applied twice. This loss cannot go "
        f"below ln(e + C - 1) - 1 = {floor:.4g} for C = {classes} (chance is ln C = "
        f"{chance:.4g}); it went from {first:.4g} to {now:.4g} (lowest {lowest:.4g}), and the "
        f"squashed gradients make training slow",
        "remove the softmax from the model and give nn.CrossEntropyLoss the logits (apply "
        "softmax only to read probabilities at prediction time)",
        {"classes": classes, "axis": record.axis, "floor": floor, "chance": chance,
         "first_loss": first, "loss": now, "lowest_loss": lowest,
         "row_sum_error": max(r.sum_error for r in fitting),
         "gradient_misfit": max(r.misfit for r in fitting), "samples": len(fitting)})]


def probabilities_into_nll(view):
    """Probabilities into ``nn.NLLLoss`` (which expects log-probabilities): the loss is
    ``-p[y]``, always negative, and its gradient picks the target's entry of each row."""
    records = view.signals.get("probabilities") or []
    fitting = [r for r in records if _simplex(r) and _picks(r)]
    contrary = [r for r in records
                if _simplex(r) and r.pick_misfit is not None and not _picks(r)]
    if len(fitting) < MIN_SAMPLES or contrary or not view.losses.size:
        return []
    losses = view.losses[np.isfinite(view.losses)]
    if not losses.size or float(losses.max()) > 0:   # NLL of log-probabilities is >= 0
        return []
    record = fitting[-1]
    first, now, highest = float(losses[0]), float(losses[-1]), float(losses.max())
    return [Finding(
        "PROBABILITIES_AS_LOGITS", "warning", _softmax_layer(view),
        f"the model's output is already probabilities (entries >= 0, each row summing to 1 over "
        f"its {record.classes} classes on axis {record.axis}: a softmax at the end of the "
        f"model) and the loss's gradient on it picks the target's entry of each row, as "
        f"nn.NLLLoss does (in {len(fitting)} sampled steps): NLLLoss expects "
        f"log-probabilities, so the loss is -p[target], always negative (from {first:.4g} to "
        f"{now:.4g}, never above {highest:.4g}), instead of -log p[target]",
        "end the model with log_softmax (nn.LogSoftmax(dim=1)) instead of softmax, or drop "
        "it and use nn.CrossEntropyLoss on the logits",
        {"classes": record.classes, "axis": record.axis, "first_loss": first, "loss": now,
         "highest_loss": highest, "row_sum_error": max(r.sum_error for r in fitting),
         "gradient_misfit": max(r.pick_misfit for r in fitting), "samples": len(fitting)})]


def _picks(record):
    return (record.pick_misfit is not None and record.pick_rows > 0
            and record.pick_misfit <= MISFIT_TOLERANCE)


def _simplex(record):
    return record.smallest >= -SIMPLEX_TOLERANCE and record.sum_error <= SIMPLEX_TOLERANCE


def _fits(record):
    """The gradient fits; with 2 classes any row summing to 0 fits, so there the scale must be
    one number for all rows too (unweighted cross-entropy; a squared error's varies)."""
    if record.misfit is None or record.rows == 0 or record.misfit > MISFIT_TOLERANCE:
        return False
    return record.classes > 2 or (record.rows > 1 and record.spread <= MISFIT_TOLERANCE)


def _softmax_layer(view):
    """The name of the softmax module that ends the model, or None (a functional softmax)."""
    layers = view.layout.layers
    last = layers[-1] if layers else None
    return last.name if last is not None and "Softmax" in last.type_name else None


CHECKS = (probabilities_as_logits, probabilities_into_nll)
