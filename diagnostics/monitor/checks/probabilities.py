"""Probabilities as logits: a softmax at the end of the model, then ``nn.CrossEntropyLoss``.

Cross-entropy applies log-softmax to what it is given. Given probabilities ``p`` (entries in
[0, 1], rows summing to 1) instead of logits, its loss is ``log(sum_j e^p_j) - p_y``, which is
smallest when ``p`` is the one-hot target: ``ln(e + C - 1) - 1`` for C classes (1.461 for
C = 10), far above 0, and its gradient is squashed by the softmax applied twice, so training
is slow and stalls. Given to ``nn.NLLLoss``, which expects log-probabilities, the loss is
``-p[y]``: negative, and linear in the probabilities. The probe measured the output's rows
and the loss's gradient on them.

The same mistake with a sigmoid (``nn.Sigmoid`` at the end, then ``nn.BCEWithLogitsLoss``)
has no number that tells it safely: sigmoid outputs in (0, 1) are also plausible logits. It is
read from the loss's autograd graph instead (``SigmoidBackward0`` feeding
``BinaryCrossEntropyWithLogitsBackward0`` through reshapes only), which is unambiguous, and so
is a softmax feeding cross-entropy's ``LogSoftmaxBackward0``.
"""
import dataclasses
import math

import numpy as np

from ...findings import Finding
from ..probes.probabilities import SIMPLEX_TOLERANCE  # noqa: F401 - part of this check's rule
from ..probes.probabilities import OutputProbabilities

MISFIT_TOLERANCE = 1e-2    # cross-entropy's own gradient fits to float rounding (about 1e-6)
MIN_SAMPLES = 2            # sampled steps that show it


def cross_entropy_floor(classes):
    """The lowest cross-entropy possible when its input is a probability vector over
    ``classes`` classes: the one-hot target itself as the input."""
    return math.log(math.e + classes - 1) - 1


_NOTHING = OutputProbabilities((), ())


def _signal(view):
    """The probe's records, or none when it published nothing."""
    return view.signal(OutputProbabilities) or _NOTHING


def bce_with_logits_floor(target):
    """The lowest BCE-with-logits possible for one element whose logit is a probability in
    (0, 1): ``ln(1 + e^-1)`` for target 1 (logit 1), ``ln 2`` for target 0 (logit 0)."""
    return math.log1p(math.exp(-1.0)) if target else math.log(2.0)


def probabilities_as_logits(view):
    """From the loss's graph when the Monitor saw it, from the values otherwise; both: the
    values' numbers with the graph's chain."""
    twice = _signal(view).squashed_twice
    found = _softmax_values(view)
    softmax = [r for r in twice if r.kind == "softmax"]
    sigmoid = [r for r in twice if r.kind == "sigmoid"]
    if found and softmax:
        finding, chain = found[0], softmax[-1].chain
        found = [dataclasses.replace(
            finding, location=finding.location or softmax[-1].module,
            message=finding.message + f"; the loss's autograd graph shows it: "
                                      f"{' <- '.join(chain)}",
            evidence={**finding.evidence, "graph_chain": list(chain)})]
    elif softmax:
        found = [_squashed_twice(view, softmax)]
    if sigmoid:
        found.append(_squashed_twice(view, sigmoid))
    return found


def _squashed_twice(view, records):
    """The finding from the graph alone (``records`` of one kind); its numbers are the floor
    the loss cannot go below."""
    record = records[-1]
    chain = " <- ".join(record.chain)
    where = f"module '{record.module}'" if record.module else "a functional call"
    evidence = {"graph_chain": list(record.chain), "module": record.module,
                "samples": len({r.step for r in records})}
    finite = np.flatnonzero(np.isfinite(view.losses)) if view.losses.size else np.array([])
    now = ","
    if finite.size:   # a finding keeps its first words: say when the loss was this
        last = int(finite[-1])
        now = f", and it is {float(view.losses[last]):.4g} at step {last};"
        evidence["loss"] = float(view.losses[last])
    if record.kind == "sigmoid":
        low, high = bce_with_logits_floor(1), bce_with_logits_floor(0)
        evidence.update(floor_positive=low, floor_negative=high)
        return Finding(
            "PROBABILITIES_AS_LOGITS", "error", record.module,
            f"the loss's autograd graph feeds the output of a sigmoid ({where}) to binary "
            f"cross-entropy with logits: {chain}. BCEWithLogitsLoss applies the sigmoid "
            f"itself, so it is applied twice: its logits are stuck in (0, 1), the loss per "
            f"element cannot go below ln(1 + 1/e) = {low:.4g} for a positive target and "
            f"ln 2 = {high:.4g} for a negative one{now} the gradients are squashed",
            "remove the sigmoid from the model and give BCEWithLogitsLoss the raw outputs "
            "(apply torch.sigmoid only to read probabilities at prediction time), or keep the "
            "sigmoid and use nn.BCELoss",
            evidence)
    simplex = [r for r in _signal(view).records if _simplex(r)]
    floor = "ln(e + C - 1) - 1 for C classes"
    if simplex:
        classes = simplex[-1].classes
        evidence.update(classes=classes, axis=simplex[-1].axis,
                        floor=cross_entropy_floor(classes))
        floor = (f"ln(e + C - 1) - 1 = {cross_entropy_floor(classes):.4g} for C = {classes} "
                 f"(chance is ln C = {math.log(classes):.4g})")
    return Finding(
        "PROBABILITIES_AS_LOGITS", "error", record.module or _softmax_layer(view),
        f"the loss's autograd graph feeds the output of a softmax ({where}) to the "
        f"log-softmax of cross-entropy: {chain}. nn.CrossEntropyLoss applies log-softmax "
        f"itself, so the softmax is applied twice: the loss cannot go below {floor}{now} "
        f"the gradients are squashed",
        "remove the softmax from the model and give nn.CrossEntropyLoss the logits (apply "
        "softmax only to read probabilities at prediction time)",
        evidence)


def _softmax_values(view):
    """The finding from the output's values and the loss's gradient on them."""
    records = _signal(view).records
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
    records = _signal(view).records
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
    return record.on_simplex


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
