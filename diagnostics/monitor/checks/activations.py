"""Activation health: dead ReLU units, saturated sigmoid/tanh, exploding and collapsed outputs."""
import statistics

import numpy as np

from ...findings import Finding
from ..kinds import EMBEDDING, RECTIFIER, SATURATION
from ..layout import display_name
from ..probes.activations import CompiledReplay, OutputLayers
from .advice import lower_learning_rate


def dead_units(view):
    findings = []
    thresholds = view.thresholds
    for layer in view.layout.layers:
        if layer.kind != RECTIFIER:
            continue
        dead = view.dead_units(layer.name)
        if dead is None or dead.mean() < thresholds.dead_fraction:
            continue
        records = view.activations(layer.name)
        fraction = float(dead.mean())
        examples, steps = view.units.examples(layer.name)
        zeros = statistics.fmean(r.zero_fraction for r in records)
        severity = "error" if fraction > thresholds.dead_fraction_error else "warning"
        died = _died_in_training(view.units, layer.name, dead)
        findings.append(Finding(
            "DEAD_UNITS", severity, layer.name,
            f"{int(dead.sum())} of {dead.size} units ({fraction:.0%}) of "
            f"layer {display_name(layer.name)} ({layer.type_name}) gave 0 on every one of "
            f"{examples} values in the last {steps} sampled steps (a healthy ReLU layer has about "
            f"half its outputs at 0, but each unit fires on some inputs)"
            + _died_text(died, "fired"),
            _dead_fix(view, died, dead),
            {"dead_units": int(dead.sum()), "units": int(dead.size), "dead_fraction": fraction,
             "zero_fraction": zeros, "values_per_unit": examples, "died_in_training": died,
             "dead_indices": np.flatnonzero(dead)[:20].tolist()}))
    if not any(layer.kind == RECTIFIER for layer in view.layout.layers):
        findings += _units_without_gradient(view)
    return findings


def _died_in_training(activity, name, dead):
    """How many of the ``dead`` units gave a nonzero value at an earlier sampled step."""
    once = activity.once_active(name)
    if once is None or once.shape != dead.shape:
        return 0
    return int(np.count_nonzero(dead & once))


def _died_text(died, verb):
    if not died:
        return ""
    return (f"; {died} of them {verb} at earlier sampled steps: they died during training (a "
            f"step too large pushes a unit to 0 for every input, and no gradient brings it back)")


def _dead_fix(view, died, dead, activation="ReLU"):
    """Units that died during training: the step size first; dead from the start: the init."""
    init = "He (Kaiming) init, biases at 0 rather than negative"
    leaky = "LeakyReLU(0.01) instead of ReLU; " if "ReLU" in activation else ""
    norm = f"BatchNorm/LayerNorm before the {activation}"
    if died * 2 >= int(dead.sum()) > 0:
        return f"{lower_learning_rate(view)}; {leaky}{norm}; {init}"
    return f"{leaky}{init}; {lower_learning_rate(view)}; {norm}"


def _units_without_gradient(view):
    """Dead units of a model without a ReLU module (``F.relu``, ``x.clamp(0)``, or another
    activation flat where its inputs sit): seen from the gradient instead. A unit whose row of
    weights got exactly 0 gradient in every recent batch never reaches the loss."""
    findings = []
    thresholds = view.thresholds
    for name in view.layout.unit_weights:
        dead = view.units_without_gradient(name)
        if dead is None or dead.mean() < thresholds.dead_fraction:
            continue
        layer = name.rpartition(".")[0]
        fraction = float(dead.mean())
        examples, steps = view.gradient_rows.examples(name)
        type_name = view.layout.type_names.get(layer, "layer")
        died = _died_in_training(view.gradient_rows, name, dead)
        after, peak = _activation_after(view, layer), _largest_output(view, layer, dead)
        died_text = _died_text(died, "got a gradient")
        below_zero = peak is not None and peak < 0
        if after is not None and below_zero:
            why = (f": layer {display_name(after.name)} ({after.type_name}) after them passes "
                   f"back 0, the largest of their outputs being {peak:.4g} at the last sampled "
                   f"step, where {after.type_name} is flat")
        elif below_zero:
            why = (f", as behind a ReLU that is 0 for every input (applied as a function, so "
                   f"there is no ReLU module to watch): the largest of their outputs is "
                   f"{peak:.4g} at the last sampled step")
        elif dead.all():
            why = ": no gradient reaches the layer at all (what comes after it passes none back)"
            if died:
                died_text = ("; it got a gradient at earlier sampled steps, so it stopped during "
                             "training: look first at the dead layers after it")
        elif after is not None:
            why = (f": layer {display_name(after.name)} ({after.type_name}) after them passes "
                   f"back 0 for every value they give it")
        else:
            why = (", as behind a ReLU that is 0 for every input (applied as a function, so "
                   "there is no ReLU module to watch)")
        findings.append(Finding(
            "DEAD_UNITS", "error" if fraction > thresholds.dead_fraction_error else "warning",
            layer,
            f"{int(dead.sum())} of {dead.size} units ({fraction:.0%}) of layer "
            f"{display_name(layer)} ({type_name}) got exactly 0 gradient in each of the last "
            f"{steps} sampled steps ({examples} examples): their outputs never reach the loss"
            f"{why}{died_text}",
            _dead_fix(view, died, dead, "ReLU" if after is None else after.type_name),
            {"dead_units": int(dead.sum()), "units": int(dead.size), "dead_fraction": fraction,
             "seen_through": "gradient", "parameter": name, "examples": examples,
             "died_in_training": died, "activation_after": None if after is None else after.name,
             "largest_output": peak, "dead_indices": np.flatnonzero(dead)[:20].tolist()}))
    return findings


def _activation_after(view, layer):
    """The module that ran right after ``layer`` in the latest sampled step, when it holds no
    parameters (an activation: GELU, SiLU, Tanh...); else None."""
    sample = next((s for s in reversed(view.recent) if layer in s.activations), None)
    if sample is None:
        return None
    names = list(sample.activations)
    following = names[names.index(layer) + 1:][:1]
    info = next((l for l in view.layout.layers if l.name in following), None)
    parameters = getattr(getattr(info, "module", None), "parameters", None)
    if parameters is None or next(iter(parameters()), None) is not None:
        return None
    return info


def _largest_output(view, layer, dead):
    """The largest output of the ``dead`` units of ``layer`` in the latest sampled step."""
    records = view.activations(layer)
    if not records or records[-1].unit_max.shape != dead.shape or not dead.any():
        return None
    peak = float(np.max(records[-1].unit_max[dead]))
    return peak if np.isfinite(peak) else None


def saturated_activations(view):
    """Hidden sigmoid/tanh layers whose outputs sit at the flat ends: the gradient to every
    layer before them nearly stops. An output layer (its output is the model's, straight into
    the loss: a sigmoid under BCE, a generator's tanh image) is not judged: there the flat
    ends are right answers (background pixels at 0), BCE's gradient per logit (p - y) does not
    vanish through them, and a wrong saturated output shows in the loss."""
    findings = []
    output = view.signal(OutputLayers)
    output_layers = output.names if output is not None else frozenset()
    for layer in view.layout.layers:
        if layer.kind not in SATURATION or layer.name in output_layers:
            continue
        records = view.activations(layer.name)
        if not records:
            continue
        fraction = statistics.fmean(r.saturated_fraction for r in records)
        if fraction < view.thresholds.saturated_fraction:
            continue
        findings.append(Finding(
            "SATURATED_ACTIVATIONS", "warning", layer.name,
            f"{fraction:.0%} of the outputs of layer {display_name(layer.name)} "
            f"({layer.type_name}) "
            f"sit at the flat ends of the curve, where the gradient is almost 0",
            "normalize the inputs; Xavier/Glorot init (gain 5/3 for tanh) or smaller weights; "
            "BatchNorm/LayerNorm before the activation; ReLU/GELU instead of "
            f"{layer.type_name.lower()} in hidden layers",
            {"saturated_fraction": fraction, "mean": statistics.fmean(r.mean for r in records),
             "std": statistics.fmean(r.std for r in records)}))
    return findings


def exploding_activations(view):
    limit = view.thresholds.activation_rms
    over = []
    for layer in view.layout.layers:
        records = view.activations(layer.name)
        if not records:
            continue
        rms = statistics.median(r.rms for r in records)
        finite = all(r.finite for r in records)
        if not finite or not rms <= limit:
            over.append((layer, rms, finite, max(abs(r.maximum) for r in records),
                         max(abs(r.minimum) for r in records)))
    if not over:
        return []
    layer, rms, finite, top, bottom = over[0]
    return [Finding(
        "EXPLODING_ACTIVATIONS", "warning" if finite else "error", layer.name,
        (f"the output of layer {display_name(layer.name)} ({layer.type_name}) has a root mean "
         f"square of {rms:.4g} (largest magnitude {max(top, bottom):.4g})" if finite else
         f"the output of layer {display_name(layer.name)} ({layer.type_name}) holds NaN or inf")
        + (f"; {len(over)} layers are above {limit:g}" if len(over) > 1 else ""),
        "normalize the inputs (zero mean, unit variance); smaller init (He/Xavier scale, "
        "1/sqrt(fan_in)); BatchNorm/LayerNorm; "
        f"{lower_learning_rate(view)}",
        {"rms": rms, "max_abs": max(top, bottom), "threshold": limit,
         "layers": [display_name(layer.name) for layer, *_ in over]})]


def collapsed_activations(view):
    inputs = [s.inputs for s in view.samples if s.inputs is not None]
    if inputs and all(r.relative_spread == 0 for r in inputs):
        return []   # the batch itself does not vary
    tolerance = view.thresholds.collapse_tolerance
    for layer in view.layout.layers:
        records = [r for r in view.activations(layer.name) if r.examples >= 2 and r.finite]
        if layer.kind == EMBEDDING or not records:
            continue
        if layer.kind == RECTIFIER and all(r.silent for r in records):
            return []   # every unit dead: DEAD_UNITS says it, and explains what follows
        spread = max(r.relative_spread for r in records)
        if not spread <= tolerance:   # NaN (inf - inf) is no evidence of a collapse
            continue
        last = records[-1]
        return [Finding(
            "COLLAPSED_ACTIVATIONS", "warning", layer.name,
            f"every unit of layer {display_name(layer.name)} ({layer.type_name}) gives the same "
            f"value for every example (mean {last.mean:.4g}): the layer no longer depends on "
            f"its input",
            "look for weights initialised to a constant or zero (symmetric units), a "
            "saturated activation before this layer, or a learning rate that drove the "
            "weights to zero; use random init (He/Xavier)",
            {"relative_spread": spread, "mean": last.mean, "units": last.units})]
    return []


def unseen_layers(view):
    """A compiled model whose replay failed: its layers' statistics cannot be taken."""
    compiled = view.signal(CompiledReplay)
    if compiled is None or compiled.error is None:
        return []
    return [Finding(
        "UNSEEN_LAYERS", "info", None,
        f"the model is compiled (torch.compile): hooks inside the compiled graph do not run, "
        f"and replaying its module underneath (_orig_mod) without gradients raised "
        f"{compiled.error}, so the statistics of its {compiled.layers} layers and their "
        f"checks (dead units, saturation, exploding or collapsed activations) are missing"
        + (f" after the first {compiled.replays} sampled steps" if compiled.replays
           else "")
        + "; gradients, updates and the loss are still watched",
        "to see the layers, monitor a run of the uncompiled model (Monitor(model) on the "
        "model before torch.compile, called as it is), or make its forward run eagerly "
        "under torch.no_grad()",
        {"replays": compiled.replays, "error": compiled.error,
         "layers": compiled.layers})]


CHECKS = (dead_units, saturated_activations, exploding_activations, collapsed_activations,
          unseen_layers)
