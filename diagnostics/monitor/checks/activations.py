"""Activation health: dead ReLU units, saturated sigmoid/tanh, exploding and collapsed outputs."""
import statistics

import numpy as np

from ...findings import Finding
from ..kinds import EMBEDDING, RECTIFIER, SATURATION
from ..layout import display_name
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
        findings.append(Finding(
            "DEAD_UNITS", severity, layer.name,
            f"{int(dead.sum())} of {dead.size} units ({fraction:.0%}) of "
            f"layer {display_name(layer.name)} ({layer.type_name}) gave 0 on every one of "
            f"{examples} values in the last {steps} sampled steps (a healthy ReLU layer has about "
            f"half its outputs at 0, but each unit fires on some inputs)",
            f"LeakyReLU(0.01) instead of ReLU; He (Kaiming) init, biases at 0 rather than "
            f"negative; {lower_learning_rate(view)}; BatchNorm/LayerNorm before the ReLU",
            {"dead_units": int(dead.sum()), "units": int(dead.size), "dead_fraction": fraction,
             "zero_fraction": zeros, "values_per_unit": examples,
             "dead_indices": np.flatnonzero(dead)[:20].tolist()}))
    if not any(layer.kind == RECTIFIER for layer in view.layout.layers):
        findings += _units_without_gradient(view)
    return findings


def _units_without_gradient(view):
    """Dead units of a model that applies its ReLUs as functions (``F.relu``, ``x.clamp(0)``),
    where no ReLU module can be watched: seen from the gradient instead. A unit whose row of
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
        findings.append(Finding(
            "DEAD_UNITS", "error" if fraction > thresholds.dead_fraction_error else "warning",
            layer,
            f"{int(dead.sum())} of {dead.size} units ({fraction:.0%}) of layer "
            f"{display_name(layer)} ({type_name}) got exactly 0 gradient in each of the last "
            f"{steps} sampled steps ({examples} examples): their outputs never reach the loss, "
            f"as behind a ReLU that is 0 for every input (applied as a function, so there is "
            f"no ReLU module to watch)",
            f"LeakyReLU(0.01) instead of ReLU; He (Kaiming) init, biases at 0 rather than "
            f"negative; {lower_learning_rate(view)}; BatchNorm/LayerNorm before the ReLU",
            {"dead_units": int(dead.sum()), "units": int(dead.size), "dead_fraction": fraction,
             "seen_through": "gradient", "parameter": name, "examples": examples,
             "dead_indices": np.flatnonzero(dead)[:20].tolist()}))
    return findings


def saturated_activations(view):
    findings = []
    for layer in view.layout.layers:
        if layer.kind not in SATURATION:
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
    compiled = view.signals.get("compiled")
    if not compiled or compiled["error"] is None:
        return []
    return [Finding(
        "UNSEEN_LAYERS", "info", None,
        f"the model is compiled (torch.compile): hooks inside the compiled graph do not run, "
        f"and replaying its module underneath (_orig_mod) without gradients raised "
        f"{compiled['error']}, so the statistics of its {compiled['layers']} layers and their "
        f"checks (dead units, saturation, exploding or collapsed activations) are missing"
        + (f" after the first {compiled['replays']} sampled steps" if compiled["replays"]
           else "")
        + "; gradients, updates and the loss are still watched",
        "to see the layers, monitor a run of the uncompiled model (Monitor(model) on the "
        "model before torch.compile, called as it is), or make its forward run eagerly "
        "under torch.no_grad()",
        {"replays": compiled["replays"], "error": compiled["error"],
         "layers": compiled["layers"]})]


CHECKS = (dead_units, saturated_activations, exploding_activations, collapsed_activations,
          unseen_layers)
