"""TARGET_CARRIES_GRADIENT, read off what a loss function got as its target
(``probes/target_gradients.py``)."""
from ...findings import Finding
from ..probes.target_gradients import TargetGradients

MIN_RECORDS = 2     # sampled steps that show it: the code path of every step, not one branch

_LOSSES = {"mse_loss": "MSELoss", "l1_loss": "L1Loss", "smooth_l1_loss": "SmoothL1Loss",
           "huber_loss": "HuberLoss", "binary_cross_entropy": "BCELoss",
           "binary_cross_entropy_with_logits": "BCEWithLogitsLoss",
           "cross_entropy": "CrossEntropyLoss", "kl_div": "KLDivLoss", "nll_loss": "NLLLoss"}


def target_carries_gradient(view):
    targets = view.signal(TargetGradients)
    if targets is None:
        return []
    findings = []
    for function in dict.fromkeys(r.function for r in targets.records):
        records = [r for r in targets.records if r.function == function]
        if len(records) < MIN_RECORDS:
            continue
        last = records[-1]
        names = ", ".join(last.parameters) + (", ..." if last.count > len(last.parameters)
                                              else "")
        findings.append(Finding(
            "TARGET_CARRIES_GRADIENT", "warning", "loss",
            f"{_LOSSES.get(function, function)}'s target carries gradient into the parameters "
            f"this optimizer trains, at each of the {len(records)} sampled steps from step "
            f"{records[0].step} to {last.step}: the target is computed by the trained network "
            f"itself, in a computation of its own ({', '.join(last.target_ops)}) that reaches "
            f"{last.count} of the parameters the prediction reaches ({names}); back-propagation "
            f"moves the target towards the prediction as well as the prediction towards it, so "
            f"the loss no longer pulls towards the values it was written for",
            "compute the target under torch.no_grad() or .detach() it (a TD target from a "
            "target network or the online net under no_grad, a pseudo-label from a no_grad "
            "pass); if both sides are meant to train, compare them with a loss written "
            "symmetrically, not through the target argument",
            {"function": function, "parameters": list(last.parameters),
             "parameter_count": last.count, "target_ops": list(last.target_ops),
             "sampled_steps": [r.step for r in records]}))
    return findings


CHECKS = (target_carries_gradient,)
