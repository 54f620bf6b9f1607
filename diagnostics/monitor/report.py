"""``MonitorReport``: what a Monitor saw, as findings, tables and history; text and JSON."""
import math
import textwrap
from dataclasses import dataclass, field

import numpy as np

from ..jsonable import to_jsonable
from .layout import display_name
from .probes.other_optimizer import TrainedElsewhere


@dataclass(frozen=True)
class LayerSummary:
    """A layer's output at the last sampled step, with its window's dead-unit share and gradient."""

    name: str
    type_name: str
    mean: float = math.nan
    std: float = math.nan
    min: float = math.nan
    max: float = math.nan
    zero_fraction: float = math.nan
    saturated_fraction: float = math.nan   # sigmoid/tanh layers only
    dead_fraction: float = math.nan        # ReLU layers only, over the last sampled steps
    units: int = 0
    gradient_rms: float = math.nan         # RMS of the layer's weight gradient, recent median


@dataclass(frozen=True)
class ParameterSummary:
    """A parameter's gradient at the last sampled step that gave it one, and its last update."""

    name: str
    shape: tuple
    gradient_norm: float = math.nan
    gradient_abs_mean: float = math.nan
    gradient_max: float = math.nan
    update_ratio: float = math.nan         # |Δw| / |w| of the last measured optimizer step
    received_gradient: bool = False        # within the window


@dataclass(frozen=True)
class MonitorReport:
    """Findings first; then loss, input, per-layer and per-parameter statistics; then history.

    ``findings`` are those that hold at the end (the verdict); ``resolved`` those that held for
    a while and then stopped, with the steps they were seen."""

    findings: list
    steps: int
    sampled_steps: int
    every: int
    window: int
    backend: str
    model_type: str
    loss: dict = field(default_factory=dict)
    input: dict = field(default_factory=dict)
    layers: list = field(default_factory=list)
    parameters: list = field(default_factory=list)
    history: object = field(default=None, repr=False, compare=False)
    resolved: list = field(default_factory=list)
    mixed_precision: dict = field(default_factory=dict)

    @classmethod
    def build(cls, *, view, history, findings, backend, model_type, last_updates,
              resolved=(), mixed_precision=None):
        return cls(
            findings=list(findings), resolved=list(resolved),
            mixed_precision=dict(mixed_precision or {}),
            steps=history.steps, sampled_steps=len(history),
            every=view.every, window=len(view.samples), backend=backend,
            model_type=model_type, loss=_loss_summary(view), input=_input_summary(view),
            layers=_layer_summaries(view), parameters=_parameter_summaries(view, last_updates),
            history=history)

    # --------------------------------------------------------------- access
    @property
    def passed(self):
        """True when no finding is a warning or an error."""
        return not any(f.is_alarm for f in self.findings)

    def codes(self):
        return [f.code for f in self.findings]

    def to_dict(self):
        return to_jsonable({
            "findings": [f.to_dict() for f in self.findings],
            "resolved": [f.to_dict() for f in self.resolved],
            "mixed_precision": self.mixed_precision,
            "steps": self.steps, "sampled_steps": self.sampled_steps, "every": self.every,
            "window": self.window, "backend": self.backend, "model_type": self.model_type,
            "loss": self.loss, "input": self.input,
            "layers": [vars(layer) for layer in self.layers],
            "parameters": [vars(param) for param in self.parameters],
            "history": self.history.to_dict() if self.history is not None else None})

    def plot(self, directory):
        """Save the loss curve, gradient flow and activation statistics as PNGs in ``directory``;
        returns their paths. Needs matplotlib (the ``plot`` extra)."""
        from .plots import save_plots

        return save_plots(self, directory)

    # -------------------------------------------------------------- display
    def __str__(self):
        lines = [f"gradhunt Monitor: {self.backend} {self.model_type}, {self.steps} steps, "
                 f"{self.sampled_steps} sampled (every {self.every})"]
        lines += _loss_lines(self.loss) + _input_lines(self.input)
        lines += _mixed_precision_lines(self.mixed_precision) + [""]
        lines += _finding_lines(self.findings, self.steps) + [""]
        if self.resolved:
            lines += _resolved_lines(self.resolved) + [""]
        lines += _layer_lines(self.layers) + [""] + _parameter_lines(self.parameters)
        return "\n".join(lines)


# ----------------------------------------------------------------- summaries
def _loss_summary(view):
    losses = view.losses
    if losses.size == 0:
        return {}
    finite = np.flatnonzero(np.isfinite(losses))
    summary = {"first": float(losses[0]), "last": float(losses[-1])}
    if finite.size:
        best = int(finite[np.argmin(losses[finite])])
        summary.update({"min": float(losses[best]), "min_step": best})
    width = view.output_width
    if width and width >= 2:
        summary.update({"classes": width, "chance": math.log(width)})
    elsewhere = view.signal(TrainedElsewhere)
    if elsewhere is not None and elsewhere.names:
        summary["trained_elsewhere"] = list(elsewhere.names)
    return summary


def _input_summary(view):
    record = next((s.inputs for s in reversed(view.samples) if s.inputs is not None), None)
    if record is None:
        return {}
    return {"mean": record.mean, "std": record.std, "min": record.minimum,
            "max": record.maximum}


def _layer_summaries(view):
    weights = {w.module_name: w for w in view.layout.weights}
    summaries = []
    for layer in view.layout.layers:
        records = view.activations(layer.name)
        weight = weights.get(layer.name)
        rms = view.gradient_rms(weight.name) if weight is not None else None
        values = {"gradient_rms": math.nan if rms is None else rms,
                  "dead_fraction": view.dead_fraction(layer)}
        if records:
            last = records[-1]
            values.update(mean=last.mean, std=last.std, min=last.minimum, max=last.maximum,
                          zero_fraction=last.zero_fraction, units=last.units)
            if layer.saturation is not None:
                values["saturated_fraction"] = last.saturated_fraction
        summaries.append(LayerSummary(layer.name, layer.type_name, **values))
    return summaries


def _parameter_summaries(view, last_updates):
    summaries = []
    for param in view.layout.params:
        values = {}
        got = [s.gradients[param.name] for s in view.samples if param.name in s.gradients]
        if got:
            values.update(gradient_norm=got[-1].norm, gradient_abs_mean=got[-1].abs_mean,
                          gradient_max=got[-1].abs_max, received_gradient=True)
        update = last_updates.get(param.name)
        if update is not None:
            values["update_ratio"] = update.ratio
        summaries.append(ParameterSummary(param.name, param.shape, **values))
    return summaries


# ------------------------------------------------------------------- display
_WIDTH = 96


def _number(value, width=9):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-".rjust(width)
    return f"{value:{width}.3g}"


def _percent(value, width=6):
    if value is None or math.isnan(value):
        return "-".rjust(width)
    return f"{value:{width}.0%}"


def _loss_lines(loss):
    if not loss:
        return ["loss    (no step recorded)"]
    text = f"loss    {loss['first']:.4g} -> {loss['last']:.4g}"
    if "min" in loss:
        text += f"  (lowest {loss['min']:.4g} at step {loss['min_step']})"
    if "chance" in loss:
        text += f"; a uniform guess over {loss['classes']} classes scores {loss['chance']:.4g}"
    elsewhere = loss.get("trained_elsewhere")
    if not elsewhere:
        return [text]
    shown = ", ".join(elsewhere[:3]) + (f" and {len(elsewhere) - 3} more" if len(elsewhere) > 3
                                         else "")
    note = (f"        its shape is not judged: it depends on {shown}, which another "
            f"optimizer changes (the other player of a GAN: a moving target)")
    return [text, note]


def _input_lines(summary):
    if not summary:
        return []
    return [f"input   mean {summary['mean']:.4g}, std {summary['std']:.4g}, range "
            f"[{summary['min']:.4g}, {summary['max']:.4g}]"]


def _mixed_precision_lines(amp):
    if not amp:
        return []
    text = f"mixed precision: {amp['kind']}"
    if amp.get("scale") is not None:
        text += f", loss scale {amp['scale']:.4g} (lowest {amp['lowest_scale']:.4g})"
    if amp.get("skipped_steps") is not None:
        text += (f", {amp['skipped_steps']} of {amp['counted_steps']} "
                 f"{'' if amp.get('scale') is not None else 'sampled '}steps skipped")
    return [text]


def _steps(finding):
    if finding.first_step is None:
        return ""
    if finding.first_step == finding.last_step:
        return f" (step {finding.first_step})"
    return f" (steps {finding.first_step}-{finding.last_step})"


def _resolved_lines(findings):
    lines = [f"{len(findings)} resolved (held for a while, then stopped; not in the verdict):"]
    for finding in findings:
        where = f" at {display_name(finding.location)}" if finding.location is not None else ""
        lines.append(f"  [{finding.severity}] {finding.code}{where}{_steps(finding)}, resolved "
                     f"at step {finding.resolved_at}")
        lines += textwrap.wrap(finding.message, _WIDTH, initial_indent="      ",
                               subsequent_indent="      ")
    return lines


def _finding_lines(findings, steps):
    if not findings:
        return [f"no findings: nothing looked wrong in {steps} steps"]
    roots = [f for f in findings if not f.follows_from]
    counts = {s: sum(f.severity == s for f in roots) for s in ("error", "warning", "info")}
    tally = ", ".join(f"{n} {s}{'s' if n > 1 else ''}" for s, n in counts.items() if n)
    followers = len(findings) - len(roots)
    if followers:
        tally += f"; {followers} more follow{'s' if followers == 1 else ''} from " \
                 f"{'it' if len(roots) == 1 else 'them'}"
    lines = [f"{len(roots)} finding{'s' if len(roots) > 1 else ''} ({tally}):"]
    for finding in findings:
        where = f" at {display_name(finding.location)}" if finding.location is not None else ""
        follows = f", follows from {finding.follows_from}" if finding.follows_from else ""
        lines.append(f"  [{finding.severity}] {finding.code}{where}{_steps(finding)}{follows}")
        lines += textwrap.wrap(finding.message, _WIDTH, initial_indent="      ",
                               subsequent_indent="      ")
        suggestion = finding.suggestion
        if finding.follows_from:
            suggestion = f"fix {finding.follows_from} first" + (
                f"; if this stays, {suggestion}" if suggestion else "")
        if suggestion:
            lines += textwrap.wrap(suggestion, _WIDTH, initial_indent="      try: ",
                                   subsequent_indent="           ")
    return lines


def _layer_lines(layers):
    if not layers:
        return []
    width = max(max(len(display_name(layer.name)) for layer in layers), 5)
    kinds = max(max(len(layer.type_name) for layer in layers), 4)
    head = (f"  {'layer':<{width}}  {'type':<{kinds}}  {'mean':>9} {'std':>9} {'min':>9} "
            f"{'max':>9} {'zeros':>6} {'dead':>6} {'satur.':>6} {'grad RMS':>9}")
    lines = ["layers in model order: output at the last sampled step, dead units over the "
             "last sampled steps", head]
    for layer in layers:
        lines.append(
            f"  {display_name(layer.name):<{width}}  {layer.type_name:<{kinds}}  "
            f"{_number(layer.mean)} {_number(layer.std)} {_number(layer.min)} "
            f"{_number(layer.max)} {_percent(layer.zero_fraction)} "
            f"{_percent(layer.dead_fraction)} {_percent(layer.saturated_fraction)} "
            f"{_number(layer.gradient_rms)}")
    return lines


def _parameter_lines(parameters):
    if not parameters:
        return []
    width = max(max(len(p.name) for p in parameters), 9)
    shapes = max(max(len(str(p.shape)) for p in parameters), 5)
    lines = ["parameters: gradient at the last sampled step, update of the last measured step",
             f"  {'parameter':<{width}}  {'shape':<{shapes}}  {'|grad|':>9} {'mean|g|':>9} "
             f"{'max|g|':>9} {'|dw|/|w|':>9}"]
    for p in parameters:
        lines.append(
            f"  {p.name:<{width}}  {str(p.shape):<{shapes}}  {_number(p.gradient_norm)} "
            f"{_number(p.gradient_abs_mean)} {_number(p.gradient_max)} "
            f"{_number(p.update_ratio)}")
    return lines
