"""Gradient health: vanishing and exploding flow, stale (never zeroed) and missing gradients."""
import itertools
import statistics

import numpy as np

from ...findings import Finding
from ..layout import display_name
from ..probes.gradients import ZeroStarted
from .advice import clip_gradients, lower_learning_rate


def vanishing_gradients(view):
    """The gradient vanishes on its way to the input: the first weights in model order get
    less than ``vanishing_ratio`` of the largest gradient RMS. A starved layer after one with an
    ordinary gradient is not vanishing
    flow: attention's query and key projections get tiny gradients at init (the softmax of
    near-uniform scores is flat) while the embeddings before them learn."""
    flow = [(w, view.gradient_rms(w.name)) for w in view.layout.weights]
    flow = [(w, rms) for w, rms in flow if rms is not None and np.isfinite(rms)]
    if len(flow) < 2:
        return []
    reference, top = max(flow, key=lambda item: item[1])
    if top <= 0:
        return []
    limit = view.thresholds.vanishing_ratio * top
    starved = list(itertools.takewhile(lambda item: item[1] < limit, flow))
    starved = [(w, rms) for w, rms in starved
               if _blocking_cofactor(view, w, rms / top) is None]
    if not starved:
        return []
    first, rms = starved[0]   # flow is in the model's own order: the earliest starved layer
    return [Finding(
        "VANISHING_GRADIENTS", "warning", first.module_name,
        f"the gradient reaching layer {display_name(first.module_name)} is {rms / top:.2g} times "
        f"that of layer {display_name(reference.module_name)} (RMS {rms:.3g} vs {top:.3g}); "
        f"the first {len(starved)} of {len(flow)} layers get less than "
        f"{view.thresholds.vanishing_ratio:g} of the largest",
        "ReLU/GELU instead of sigmoid/tanh in hidden layers; residual (skip) connections; "
        "BatchNorm/LayerNorm; He (Kaiming) init; fewer layers",
        {"ratio": rms / top, "reference_layer": display_name(reference.module_name),
         "starved_layers": [display_name(w.module_name) for w, _ in starved],
         "gradient_rms": {display_name(w.module_name): value for w, value in flow}})]


def _blocking_cofactor(view, weight, ratio):
    """A parameter after ``weight`` in model order that started at zero (LoRA's ``B``, a
    zero-initialised head or gain) and is still small enough to explain ``ratio``: what it
    multiplies gets a gradient in proportion to its size, so ``weight``'s gradient, scaled to
    that factor at a usual size, would not be starved. Its name, or None."""
    started = view.signal(ZeroStarted)
    sizes = started.sizes if started is not None else {}
    if not sizes:
        return None
    order = [p.name for p in view.layout.params]
    after = order.index(weight.name) if weight.name in order else len(order)
    steps = [s.step for s in view.recent]
    for name in order[after + 1:]:
        seen = [sizes[name][step] for step in steps if step in sizes.get(name, {})]
        if not seen:
            continue
        size = statistics.median(seen)
        if size == 0 or ratio / size >= view.thresholds.vanishing_ratio:
            return name
    return None


def exploding_gradients(view):
    """Checked on every sampled step, on the latest: NaN/inf in a gradient, or a total norm
    above ``gradient_norm``. A step a GradScaler skipped is not one (``backward_samples``
    leaves it out; AMP_OVERFLOW judges the skipping), and gradients scaled by a factor the
    Monitor was not given have no absolute size to judge."""
    samples = view.backward_samples
    if not samples or samples[-1] is not view.samples[-1]:
        return []
    sample = samples[-1]
    if all(g.finite for g in sample.gradients.values()):
        if sample.scale_unknown or sample.gradient_norm <= view.thresholds.gradient_norm:
            return []
        return _exploding(view, sample, f"is above {view.thresholds.gradient_norm:g}")
    broken = [p for p in view.layout.trainable
              if p.name in sample.gradients and not sample.gradients[p.name].finite]
    return [Finding(
        "EXPLODING_GRADIENTS", "error", broken[0].name,
        f"the gradient of {broken[0].name} holds NaN or inf at step {sample.step} "
        f"({len(broken)} parameters affected)",
        f"{clip_gradients(view)}; {lower_learning_rate(view)}; look for log(0) or "
        f"division by zero in forward; BatchNorm/LayerNorm",
        {"step": sample.step, "parameters": [p.name for p in broken],
         "suggested_clip": view.clip_value(),   # None: no calm history to take it from
         "calm_gradient_norms": int(view.calm_gradient_norms().size)})]


def gradient_growth(view):
    """EXPLODING_GRADIENTS when the total norm grew ``gradient_growth`` times over the window."""
    samples = view.backward_samples
    if len(samples) < 4:
        return []
    norms = np.array([s.gradient_norm for s in samples])
    calm = float(np.median(norms[: len(norms) // 2]))
    latest = float(norms[-1])
    if not (calm > 0 and latest > view.thresholds.gradient_growth * calm):
        return []
    return _exploding(view, samples[-1], f"grew {latest / calm:.3g}x over the window",
                      earlier=calm)


def _exploding(view, sample, reason, earlier=None):
    largest = max(sample.gradients.items(), key=lambda item: item[1].norm)[0]
    norm = sample.gradient_norm
    return [Finding(
        "EXPLODING_GRADIENTS", "warning", largest,
        f"the total gradient norm is {norm:.4g} at step {sample.step} and {reason}; the "
        f"largest is {largest}'s ({sample.gradients[largest].norm:.4g})",
        f"{clip_gradients(view)}; {lower_learning_rate(view)}; BatchNorm/LayerNorm; a "
        f"smaller init (He/Xavier scale)",
        {"gradient_norm": norm, "earlier_norm": earlier, "step": sample.step,
         "suggested_clip": view.clip_value(), "largest_parameter": largest,
         "calm_gradient_norms": int(view.calm_gradient_norms().size)})]


def stale_gradients(view):
    """Checked on every sampled step, on the latest: was .grad already non-zero when the
    first gradient of the step arrived, and not emptied by a zero_grad before a later backward
    of the same step? Then .grad = previous + new, and zero_grad is missing."""
    if not view.samples or not view.samples[-1].stale:
        return []
    sample = view.samples[-1]
    stale = [p for p in view.layout.trainable
             if p.name in sample.stale and sample.stale[p.name].abs_max > 0
             and p.name not in sample.stale_cleared]
    if (any(p.in_optimizer for p in view.layout.trainable)
            or view.layout.optimizer_holds_others):
        # optimizer.zero_grad() clears only what the optimizer holds: .grad piling up on the
        # others is PARAMS_NOT_IN_OPTIMIZER (or, when it holds none of the model's,
        # PARAMS_NOT_UPDATING: built over other parameters), not a missing zero_grad
        stale = [p for p in stale if p.in_optimizer is not False]
    if not stale:
        return []
    first = stale[0]
    left = sample.stale[first.name]
    incoming = sample.gradients.get(first.name)
    return [Finding(
        "STALE_GRADIENTS", "error", first.name,
        f"zero_grad() is missing: at step {sample.step}, .grad of {_share(stale, view)} "
        f"still held the previous step's gradient (norm {left.norm:.3g} for {first.name}) "
        f"when backward added the new one (norm "
        f"{incoming.norm if incoming else float('nan'):.3g}), so .grad = previous + new",
        "call optimizer.zero_grad() (or model.zero_grad()) once per iteration, before "
        "loss.backward(); if you accumulate gradients over several batches on purpose, "
        "call Monitor.step() only after optimizer.step() and zero_grad() after it",
        {"step": sample.step, "parameters": [p.name for p in stale],
         "previous_norm": left.norm, "incoming_norm": incoming.norm if incoming else None})]


def no_gradient(view):
    samples = view.backward_samples
    findings = _model_cut_from_loss(view) if not samples else []
    if len(samples) >= 2:
        missing = [p for p in view.layout.trainable
                   if not any(p.name in s.gradients for s in samples)]
        # left out of the optimizer and never given a gradient: frozen by design (a backbone
        # run under no_grad); only the parameters the optimizer holds are meant to learn
        left_out = [p for p in missing if p.in_optimizer is False]
        missing = [p for p in missing if p.in_optimizer is not False]
        if left_out:
            findings.append(Finding(
                "NO_GRADIENT", "info", left_out[0].module_name,
                f"{len(left_out)} parameters ({_names(left_out)}) get no gradient and the "
                f"optimizer does not hold them: frozen, as when part of the model runs under "
                f"no_grad",
                "nothing to do if the freeze is on purpose; to train them, add them to the "
                "optimizer and run their layers outside no_grad (and without .detach())",
                {"parameters": [p.name for p in left_out], "frozen": len(left_out),
                 "sampled_steps": len(samples)}))
        for run in _runs(view.layout.trainable, missing):
            last = run[-1]
            findings.append(Finding(
                "NO_GRADIENT", "warning", last.module_name,
                f"no gradient reached {_names(run)} in {len(samples)} sampled steps while "
                f"other parameters got one"
                + (" (the optimizer holds them: they are meant to learn)"
                   if all(p.in_optimizer for p in run) else "")
                + f": the graph is cut at or after "
                f"layer {display_name(last.module_name)}, or the module is not used in forward",
                "look for .detach(), .data, .item()/.numpy() round trips or torch.no_grad() "
                "inside forward, for layers defined in __init__ but never called, and for "
                "torch.utils.checkpoint(..., use_reentrant=True) around the first layers "
                "(no input requires grad there: pass use_reentrant=False)",
                {"parameters": [p.name for p in run], "sampled_steps": len(samples)}))
    frozen = [p for p in view.layout.params if not p.trainable and p.in_optimizer]
    if frozen:
        findings.append(Finding(
            "NO_GRADIENT", "info", frozen[0].module_name,
            f"{_names(frozen)} have requires_grad=False but are in the optimizer: frozen, "
            f"so they never change",
            "if they should learn, set requires_grad=True (model.requires_grad_(True) undoes "
            "a freeze); if the freeze is on purpose, leave them out of the optimizer",
            {"parameters": [p.name for p in frozen]}))
    return findings


def _model_cut_from_loss(view):
    """No parameter of the model got a gradient in the recent sampled steps, though each
    step's loss had an autograd graph: the loss does not depend on the model's weights."""
    cut = [s for s in view.recent if s.cut_from_loss is not None]
    trainable = [p for p in view.layout.trainable   # meant to learn: frozen ones are not
                 if p.in_optimizer is not False and getattr(p.tensor, "requires_grad", True)]
    if len(cut) < 2 or len(cut) < len(view.recent) or not trainable:
        return []
    backward = {s.cut_from_loss for s in cut}
    if backward == {"no backward"}:
        why = ("loss.backward() is not called on the loss given to Monitor.step (its graph "
               "still holds what backward needs)")
        fix = "call loss.backward() before optimizer.step() in every iteration"
    else:
        why = ("backward ran on the loss, but its graph does not reach the model: the model's "
               "output is cut from the loss")
        fix = ("look for .detach(), .data or a NumPy round trip between the model's output and "
               "the loss (a GAN's generator output detached in the generator's own step), and "
               "for torch.no_grad() around the forward")
    return [Finding(
        "NO_GRADIENT", "error", trainable[0].module_name,
        f"no gradient reached any of the model's {len(trainable)} trainable parameters in the "
        f"last {len(cut)} sampled steps, though the loss has an autograd graph: {why}",
        fix,
        {"parameters": [p.name for p in trainable][:20], "sampled_steps": len(cut),
         "backward_ran": sorted(backward) == ["backward ran"]})]


def _runs(params, chosen):
    """Split ``chosen`` into runs of neighbours in ``params`` order."""
    chosen_names = {p.name for p in chosen}
    runs, current = [], []
    for param in params:
        if param.name in chosen_names:
            current.append(param)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def _share(params, view):
    total = len(view.layout.trainable)
    if len(params) == total:
        return f"all {total} parameters"
    return f"{len(params)} of {total} parameters"


def _names(params, limit=4):
    names = ", ".join(p.name for p in params[:limit])
    more = f" and {len(params) - limit} more" if len(params) > limit else ""
    return names + more


CHECKS = (vanishing_gradients, exploding_gradients, gradient_growth, stale_gradients,
          no_gradient)
