"""PROBABILITIES_AS_LOGITS, read off the values a loss received (``probes.loss_inputs``)."""
from ...findings import Finding
from ..probes.loss_inputs import EXPECTS, LossInputs

MIN_RECORDS = 2        # sampled steps that show it
LEARNING_STEPS = 50    # BCE's logits: a model trained this long gives some negative target a
                       # negative logit; values in [0, 1] at init alone say nothing

_LOSSES = {"binary_cross_entropy_with_logits": "BCEWithLogitsLoss",
           "kl_div": "KLDivLoss (its input)", "nll_loss": "NLLLoss"}
_FIX = {"logits": "drop the final sigmoid (and the clamp after it): BCEWithLogitsLoss applies "
                  "its own, in a numerically stable form; apply torch.sigmoid only to read "
                  "probabilities at inference",
        "log-probabilities": "give it log-probabilities: F.log_softmax(scores, dim=...) instead "
                             "of softmax (or use CrossEntropyLoss on the raw scores)"}


def probabilities_into_loss(view):
    inputs = view.signal(LossInputs)
    if inputs is None:
        return []
    findings = []
    for function, expects in EXPECTS.items():
        records = [r for r in inputs.records if r.function == function]
        if len(records) < MIN_RECORDS or not all(_probabilities(r, expects) for r in records):
            continue
        if expects == "logits" and records[-1].step - records[0].step < LEARNING_STEPS:
            continue
        smallest = min(r.smallest for r in records)
        largest = max(r.largest for r in records)
        findings.append(Finding(
            "PROBABILITIES_AS_LOGITS", "error", "loss",
            f"{_LOSSES[function]} expects {expects} but was given values in [0, 1] at every one "
            f"of the {len(records)} sampled steps from step {records[0].step} to "
            f"{records[-1].step} (smallest {smallest:.3g}, largest {largest:.3g}, shape "
            f"{records[-1].shape}): probabilities (a sigmoid or softmax, perhaps clamped or "
            f"scaled) where {expects} belong, so its gradient is squashed and training is slow "
            f"or stalls",
            _FIX[expects],
            {"function": function, "expects": expects, "smallest": smallest,
             "largest": largest, "sampled_steps": [r.step for r in records]}))
    return findings


def _probabilities(record, expects):
    if expects == "logits":
        return 0.0 <= record.smallest and record.largest <= 1.0
    return 0.0 <= record.smallest and record.largest <= 1.0 and record.largest > 0.0


CHECKS = (probabilities_into_loss,)
