"""Which finding follows from which: the causal chain between codes, written once as data, and
the order a report gives findings in (each root cause first, its consequences after it, each
saying what it follows from).

A row ``CAUSE: (CONSEQUENCES...)`` says that CAUSE, where it holds, is a reason for each
consequence: a learning rate collapsed by its schedule makes the loss plateau. It is not a
claim that the consequence has no other reason: a consequence is linked to a cause only when
both hold in the same report (a cause may be detected later than what it causes: a plateau is
seen within its window, a collapsed schedule once the collapse has lasted). The table is a
directed graph without cycles. Symptoms of one common cause are not chained: a learning rate
far too high makes the gradients explode and the loss NaN, and "lower the learning rate" (the
NaN's first advice) is a better lead than "clip the gradients".
"""
from dataclasses import replace

_STALLED = ("LOSS_PLATEAU", "LOSS_AT_CHANCE", "PARAMS_NOT_UPDATING")

CAUSES = {
    "LR_SCHEDULE_TOO_FAST": _STALLED + ("LOSS_OSCILLATING",),
    "LR_WARMUP_NEVER_ENDS": _STALLED,
    "CLIP_BEFORE_UNSCALE": _STALLED,
    "AMP_OVERFLOW": _STALLED,
    "ACCUMULATION_DISCARDED": ("LOSS_OSCILLATING",),
    "GRADIENTS_CLEARED_BEFORE_STEP": _STALLED,
    "CLIP_HAS_NO_EFFECT": ("EXPLODING_GRADIENTS", "LOSS_DIVERGING", "LOSS_OSCILLATING",
                           "NAN_LOSS"),
    "UNREGISTERED_PARAMETERS": _STALLED,
    "PARAMS_NOT_IN_OPTIMIZER": ("LOSS_PLATEAU", "LOSS_AT_CHANCE", "TERM_DETACHED"),
    "PROBABILITIES_AS_LOGITS": ("LOSS_PLATEAU", "LOSS_AT_CHANCE"),
    # NLL of raw scores is -score[target], unbounded below: the scores grow without end
    "SCORES_AS_LOG_PROBABILITIES": ("EXPLODING_GRADIENTS", "EXPLODING_ACTIVATIONS",
                                    "LOSS_DIVERGING", "NAN_LOSS", "LOSS_PLATEAU",
                                    "LOSS_AT_CHANCE"),
    # autograd's gradient through round/sign is zero: the layers below get none
    "MODULE_BACKWARD_IGNORED": _STALLED + ("DEAD_UNITS", "VANISHING_GRADIENTS", "NO_GRADIENT"),
    "NO_GRADIENT": _STALLED,
    "DEAD_UNITS": ("LOSS_PLATEAU", "LOSS_AT_CHANCE", "VANISHING_GRADIENTS"),
    "STALE_GRADIENTS": ("EXPLODING_GRADIENTS", "LOSS_DIVERGING", "LOSS_OSCILLATING",
                        "NAN_LOSS"),
    "EPS_UNDERFLOWS": ("NAN_LOSS", "EXPLODING_GRADIENTS"),
    "UNNORMALIZED_INPUT": ("SATURATED_ACTIVATIONS", "EXPLODING_ACTIVATIONS"),
    "SATURATED_ACTIVATIONS": ("VANISHING_GRADIENTS",),
    "DATA_NONFINITE": ("NAN_LOSS", "EXPLODING_GRADIENTS", "STEPS_SKIPPED"),
    "EXPLODING_GRADIENTS": ("STEPS_SKIPPED",),
    # padding scored in place of the real positions (an inverted mask): the real classes are
    # never targets
    "PADDING_SCORED": ("LABEL_RANGE",),
}


def order_by_cause(findings):
    """``findings`` (already in the order they rank) with each root first and its
    consequences right after it, each consequence's ``follows_from`` naming its cause; a
    finding with no cause among them keeps its place. A cause is at least as severe as what
    follows from it (a schedule that freezes the weights is as bad as the frozen weights)."""
    findings = list(findings)
    cause_of = {}
    for finding in findings:
        cause = _first_cause(finding, findings)
        if cause is not None:
            cause_of[id(finding)] = cause
    ordered, placed = [], set()

    def place(finding):
        if id(finding) in placed:
            return
        placed.add(id(finding))
        cause = cause_of.get(id(finding))
        ordered.append(finding if cause is None else replace(
            finding, follows_from=_name(cause)))
        for other in findings:
            if cause_of.get(id(other)) is finding:
                place(other)

    for finding in findings:
        root = finding
        while id(root) in cause_of:
            root = cause_of[id(root)]
        place(root)
    return _raise_causes(ordered)


_RANK = {"info": 0, "warning": 1, "error": 2}


def _raise_causes(ordered):
    """Each cause takes the highest severity among what follows from it, transitively."""
    severity = {(f.code, f.location): f.severity for f in ordered}
    by_name = {_name(f): f for f in ordered}
    for finding in reversed(ordered):          # consequences come after their causes
        cause = by_name.get(finding.follows_from)
        if cause is None:
            continue
        own, theirs = severity[(finding.code, finding.location)], (cause.code, cause.location)
        if _RANK[own] > _RANK[severity[theirs]]:
            severity[theirs] = own
    return [f if severity[(f.code, f.location)] == f.severity
            else replace(f, severity=severity[(f.code, f.location)]) for f in ordered]


def _first_cause(finding, findings):
    """The first of ``findings`` that ``CAUSES`` lists as a reason for ``finding``."""
    return next((other for other in findings
                 if other is not finding and finding.code in CAUSES.get(other.code, ())), None)


def _name(finding):
    return f"{finding.code} at {finding.location}" if finding.location else finding.code
