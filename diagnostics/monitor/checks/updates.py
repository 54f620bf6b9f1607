"""Parameter updates: gradients arrive but the optimizer step leaves the values as they were."""
import math

from ...findings import Finding


def params_not_updating(view):
    measured = [s for s in view.samples if s.updates]
    if len(measured) < 2:
        return []
    # a gradient far below the largest layer's moves nothing at float precision: that is
    # VANISHING_GRADIENTS, not an optimizer that skips parameters
    largest = max((rms for rms in view.gradient_rms_by_name.values() if math.isfinite(rms)),
                  default=0.0)
    floor = view.thresholds.vanishing_ratio * largest
    stuck = []
    for param in view.layout.trainable:
        rms = view.gradient_rms(param.name)
        if rms is None or not rms > floor:
            continue
        # a step whose gradient missed every sampled entry (a sparse embedding gradient) is
        # no evidence: those entries had nothing to move them
        pushed = [s for s in measured if param.name in s.updates and param.name in s.gradients
                  and s.sampled_gradients.get(param.name, 1.0) > 0]
        if len(pushed) >= 2 and all(s.updates[param.name].delta_norm == 0 for s in pushed):
            stuck.append((param, len(pushed)))
    evidence = min((count for _, count in stuck), default=0)
    stuck = [param for param, _ in stuck]
    if not stuck:
        return []
    with_gradient = [p for p in view.layout.trainable
                     if any(p.name in s.gradients for s in measured)]
    everything = len(stuck) == len(with_gradient)
    outside = [p.name for p in stuck if p.in_optimizer is False]
    lrs = view.learning_rates
    if outside and len(outside) == len(stuck):
        cause = ("the optimizer does not hold them: it was built over other parameters (another "
                 "model, or a copy made before training)")
        fix = ("build the optimizer from this model's parameters: "
               "optimizer = torch.optim.SGD(model.parameters(), lr=...), after any "
               "model.to(device) or copy")
    elif lrs and all(lr == 0 for lr in lrs):
        cause = "the learning rate is 0"
        fix = "set a learning rate above 0 (and check the scheduler)"
    else:
        cause = ("the optimizer step did not change them (optimizer.step() not called, called "
                 "before backward, or on another optimizer)")
        fix = ("call optimizer.step() after loss.backward() in every iteration, on the "
               "optimizer built over this model's parameters")
    where = None if everything else stuck[0].module_name
    subject = (f"none of the {len(stuck)} parameters of the model" if everything
               else f"none of {_names(stuck)}")
    return [Finding(
        "PARAMS_NOT_UPDATING", "error", where,
        f"{subject} changed in any of the {evidence} sampled steps that measured them, "
        f"although each of those steps brought them a gradient: {cause}",
        fix,
        {"parameters": [p.name for p in stuck], "not_in_optimizer": outside,
         "learning_rates": lrs, "sampled_steps": evidence})]


def _names(params, limit=4):
    """``fc.weight``, ``fc.weight and fc.bias``, ``a, b, c, d and 3 more``."""
    names = [p.name for p in params]
    if len(names) == 1:
        return names[0]
    if len(names) <= limit:
        return ", ".join(names[:-1]) + " and " + names[-1]
    return ", ".join(names[:limit]) + f" and {len(names) - limit} more"


CHECKS = (params_not_updating,)
