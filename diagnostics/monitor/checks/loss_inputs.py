"""PROBABILITIES_AS_LOGITS and SCORES_AS_LOG_PROBABILITIES, read off the values a loss received
(``probes.loss_inputs``)."""
from ...findings import Finding
from ..probes.loss_calls import loss_name
from ..probes.loss_inputs import EXPECTS, LSE_TOLERANCE, LossInputs

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


_LOG_LOSSES = ("nll_loss", "ctc_loss", "kl_div")
_LOG_FIX = {
    "nll_loss": "end the model with F.log_softmax(scores, dim=1) (the class axis), or give the "
                "raw scores to F.cross_entropy / nn.CrossEntropyLoss, which applies log_softmax "
                "itself",
    "ctc_loss": "give CTCLoss log-probabilities: scores.log_softmax(dim=2) over the classes of "
                "its (T, N, C) input",
    "kl_div": "give KLDivLoss log-probabilities as its input: F.log_softmax(scores / T, dim=-1) "
              "(its target stays probabilities, or log-probabilities with log_target=True)"}
ROWS_OFF = 0.1         # log_softmax's rows are all within rounding of a log-sum-exp of 0: a
                       # tenth of them off at every sampled step is no rounding (raw scores
                       # under CTCLoss drift towards normalised rows, its gradient assumes them,
                       # and keep a third or more off)


def scores_as_log_probabilities(view):
    """SCORES_AS_LOG_PROBABILITIES: a loss that takes log-probabilities (NLL, CTC, KL's input)
    got rows that are none: exponentiated along the class axis they do not sum to 1 (their
    log-sum-exp is off 0), for more than ``ROWS_OFF`` of the rows at every one of at least
    ``MIN_RECORDS`` sampled steps.
    Raw scores (the ``log_softmax`` forgotten) show it from the first step; so does a
    log_softmax over another axis. Values in [0, 1] are probabilities, PROBABILITIES_AS_LOGITS'
    case, and left to it."""
    inputs = view.signal(LossInputs)
    if inputs is None:
        return []
    findings = []
    for function in _LOG_LOSSES:
        records = [r for r in inputs.records
                   if r.function == function and r.unnormalised is not None]
        if (len(records) < MIN_RECORDS or any(_probabilities(r, "log-probabilities")
                                              for r in records)
                or not all(r.unnormalised > ROWS_OFF for r in records)):
            continue
        largest = max(r.largest for r in records)
        share = min(r.unnormalised for r in records)
        losses = [r.loss for r in records if r.loss is not None]
        negative = [value for value in losses if value < 0]
        what = (f"values up to {largest:.3g} (a log-probability is never above 0)" if largest > 0
                else "values all <= 0 whose rows still do not sum to 1 along the class axis (a "
                     "log_softmax over another dim?)")
        below = (f"; the loss is below zero at {len(negative)} of {len(losses)} sampled steps "
                 f"(as low as {min(negative):.3g}), which no loss of log-probabilities can be"
                 if negative else "")
        findings.append(Finding(
            "SCORES_AS_LOG_PROBABILITIES", "error", "loss",
            f"{loss_name(function)} expects log-probabilities but was given raw scores: at "
            f"every one of the {len(records)} sampled steps from step {records[0].step} to "
            f"{records[-1].step}, "
            f"at least {share:.0%} of its input's rows, exponentiated, do not sum to 1 along "
            f"the class axis (log-sum-exp off 0 by more than {LSE_TOLERANCE:g}), with {what} "
            f"(shape {records[-1].shape}){below}; the loss then rewards inflating the scores "
            f"instead of the right class's probability",
            _LOG_FIX[function],
            {"function": function, "unnormalised_share": share, "largest": largest,
             "negative_losses": len(negative), "lowest_loss": min(losses) if losses else None,
             "sampled_steps": [r.step for r in records]}))
    return findings


def _probabilities(record, expects):
    if expects == "logits":
        return 0.0 <= record.smallest and record.largest <= 1.0
    return 0.0 <= record.smallest and record.largest <= 1.0 and record.largest > 0.0


CHECKS = (probabilities_into_loss, scores_as_log_probabilities)
