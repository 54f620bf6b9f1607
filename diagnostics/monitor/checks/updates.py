"""Parameter updates: gradients arrive but the optimizer step leaves the values as they were."""
import math

from ...findings import Finding
from ..layout import display_name


def params_not_in_optimizer(view):
    """PARAMS_NOT_IN_OPTIMIZER: the optimizer holds some of the model's parameters, and others
    that receive a gradient at every measured step never move: no optimizer holds them (one
    built from a submodule's parameters, a layer made or replaced after it was built). A
    second optimizer that trains them moves them, and a deliberate freeze takes no gradient."""
    outside = [p for p, _ in _stuck(view) if p.in_optimizer is False]
    held = [p for p in view.layout.trainable if p.in_optimizer]
    if not outside or not held:
        return []
    modules = list(dict.fromkeys(p.module_name for p in outside))
    return [Finding(
        "PARAMS_NOT_IN_OPTIMIZER", "warning", modules[0],
        f"{_names(outside)} {'gets' if len(outside) == 1 else 'get'} a gradient at every "
        f"sampled step but {'is' if len(outside) == 1 else 'are'} in no optimizer: the optimizer "
        f"holds {len(held)} of the model's parameter tensors and not "
        f"{'this one' if len(outside) == 1 else 'these'}, so "
        f"{'it never moves' if len(outside) == 1 else 'they never move'} from the initial "
        f"values (and optimizer.zero_grad() does not clear a .grad it does not hold: it piles "
        f"up); it happens when the optimizer is built from one submodule's parameters, or "
        f"before a layer was added or replaced",
        "build the optimizer after the model is complete, from all of its parameters "
        "(Optimizer(model.parameters(), ...)), or add a parameter group for "
        f"{display_name(modules[0])}; if they are frozen on purpose, call "
        f"requires_grad_(False) on them",
        {"parameters": [p.name for p in outside], "modules": modules,
         "held_by_optimizer": len(held)})]


def _stuck(view):
    """``(parameter, measured steps)`` of those that got a gradient at two measured steps or
    more and never moved. A gradient far below the largest layer's moves nothing at float
    precision (VANISHING_GRADIENTS), and a step whose gradient missed every sampled entry (a
    sparse embedding gradient) is no evidence."""
    measured = [s for s in view.samples if s.updates]
    if len(measured) < 2:
        return []
    largest = max((rms for rms in view.gradient_rms_by_name.values() if math.isfinite(rms)),
                  default=0.0)
    floor = view.thresholds.vanishing_ratio * largest
    stuck = []
    for param in view.layout.trainable:
        rms = view.gradient_rms(param.name)
        if rms is None or not rms > floor:
            continue
        pushed = [s for s in measured if param.name in s.updates and param.name in s.gradients
                  and s.sampled_gradients.get(param.name, 1.0) > 0]
        if len(pushed) >= 2 and all(s.updates[param.name].delta_norm == 0 for s in pushed):
            stuck.append((param, len(pushed)))
    return stuck


def params_not_updating(view):
    measured = [s for s in view.samples if s.updates]
    stuck = _stuck(view)
    if any(p.in_optimizer for p in view.layout.trainable):   # PARAMS_NOT_IN_OPTIMIZER's
        stuck = [(p, count) for p, count in stuck if p.in_optimizer is not False]
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


CHECKS = (params_not_in_optimizer, params_not_updating)
