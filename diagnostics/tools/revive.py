"""``revive_dead_units``: ReDo-style revival of units that never activate. It changes the model.

Per unit, the activity score is its mean |activation| over the given inputs divided by the
layer's average (ReDo, Sokar et al. 2023); a unit is dead when its score is <= ``threshold``
(0.0: exactly zero on every input). A dead unit gets fresh Kaiming-uniform incoming weights and
a zero bias, and its outgoing weights are set to zero, so at the moment of revival the model's
output does not change (with ``threshold=0``) while the unit can learn again. Optimizer moments
of the touched weights are reset when the optimizer is given.

A unit is an output channel of an activation module (ReLU, LeakyReLU, GELU, ...) fed by a
``Linear`` or ``Conv2d`` and feeding one, as recorded in the order the modules run (dropout
and identity layers in between are allowed). Other activation layers are listed as skipped.
"""
import math
from dataclasses import dataclass, field

import numpy as np

from ..backends import get_backend
from ..errors import DiagnosticsError
from ..findings import Finding
from ..jsonable import to_jsonable
from . import _training as T

ACTIVATIONS = ("ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
               "Softplus", "Sigmoid", "Tanh", "Hardtanh", "Hardswish")
PASS_THROUGH = ("Dropout", "Dropout1d", "Dropout2d", "AlphaDropout", "Identity")
SEED = 0  # the private generator for the fresh weights


@dataclass
class LayerRevival:
    """One activation layer: its incoming and outgoing weight layers and what was revived."""

    name: str
    incoming: str
    outgoing: str
    units: int
    revived: list          # unit indices
    dead_after: int

    def to_dict(self):
        return to_jsonable(self.__dict__)


@dataclass
class RevivalReport:
    """What ``revive_dead_units`` found and changed; ``changed`` tells whether the model changed."""

    layers: list
    skipped: dict          # activation module name -> why it was not analysed
    threshold: float
    output_change: float   # max |output after - output before| on the first batch
    findings: list = field(default_factory=list)

    @property
    def units(self):
        return sum(layer.units for layer in self.layers)

    @property
    def revived(self):
        return sum(len(layer.revived) for layer in self.layers)

    @property
    def changed(self):
        return self.revived > 0

    @property
    def dead_fraction_before(self):
        return self.revived / self.units if self.units else 0.0

    @property
    def dead_fraction_after(self):
        return sum(layer.dead_after for layer in self.layers) / self.units if self.units else 0.0

    def to_dict(self):
        return to_jsonable({
            "changed": self.changed, "threshold": self.threshold, "units": self.units,
            "revived": self.revived, "dead_fraction_before": self.dead_fraction_before,
            "dead_fraction_after": self.dead_fraction_after,
            "output_change": self.output_change,
            "layers": [layer.to_dict() for layer in self.layers], "skipped": self.skipped,
            "findings": [finding.to_dict() for finding in self.findings]})

    def __str__(self):
        verdict = (f"revived {self.revived} of {self.units} units (the model was changed)"
                   if self.changed else f"no dead units among {self.units} (model unchanged)")
        lines = [f"dead-unit revival: {verdict}; dead {self.dead_fraction_before:.0%} before, "
                 f"{self.dead_fraction_after:.0%} after; output change {self.output_change:.3g}"]
        for layer in self.layers:
            lines.append(f"  {layer.name:<12} {len(layer.revived):>4}/{layer.units:<4} revived "
                         f"(in: {layer.incoming}, out: {layer.outgoing}), "
                         f"{layer.dead_after} still dead")
        lines.extend(f"  {name:<12} skipped: {why}" for name, why in self.skipped.items())
        return "\n".join(lines)


def revive_dead_units(model, inputs, *, optimizer=None, threshold=0.0):
    """Find units dead over ``inputs`` and re-initialise them in place; returns a ``RevivalReport``.

    ``inputs``: a tensor or array (one batch) or an iterable of batches (tensors, arrays, or
    ``(inputs, targets)`` pairs). ``optimizer``: its moments for the touched weights are reset.
    """
    backend = get_backend(model)
    batches = _input_batches(backend, inputs)
    if optimizer is not None:
        T.check_optimizer(backend, optimizer)
    T.check_float(threshold, "threshold", expected="a finite number >= 0",
                  accept=lambda v: v >= 0)
    with backend.preserved():
        chains, skipped = _trace_chains(backend, batches[0])
        scores = _activity_scores(backend, batches, chains)
        before = _output(backend, batches[0])
    dead = {name: np.flatnonzero(scores[name] <= threshold) for name in chains}
    rng = np.random.default_rng(SEED)
    for name, chain in chains.items():
        _reinitialise(backend, chain, dead[name], optimizer=optimizer, rng=rng)
    with backend.preserved():
        after_scores = _activity_scores(backend, batches, chains)
        after = _output(backend, batches[0])
    layers = [LayerRevival(name=name, incoming=chain.incoming, outgoing=chain.outgoing,
                           units=len(scores[name]), revived=dead[name].tolist(),
                           dead_after=int(np.sum(after_scores[name] <= threshold)))
              for name, chain in chains.items()]
    change = float(np.max(np.abs(after - before))) if before.size else 0.0
    report = RevivalReport(layers=layers, skipped=skipped, threshold=float(threshold),
                           output_change=change)
    report.findings.extend(_findings(report))
    return report


@dataclass
class _Chain:
    """incoming weight layer -> activation -> outgoing weight layer, by module name."""

    incoming: str
    outgoing: str
    unit_axis: int         # where the units lie in the activation's output


def _input_batches(backend, inputs):
    if backend.is_tensor(inputs) or isinstance(inputs, np.ndarray):
        return [T.as_model_tensor(backend, inputs, "inputs")]
    if not hasattr(inputs, "__iter__") or isinstance(inputs, (str, bytes, dict)):
        raise DiagnosticsError(f"inputs: expected a tensor, an array or an iterable of batches, "
                               f"got {type(inputs).__name__}")
    batches = []
    for index, batch in enumerate(inputs):
        if isinstance(batch, (tuple, list)) and len(batch) == 2:
            batch = batch[0]
        batches.append(T.as_model_tensor(backend, batch, f"inputs[{index}]"))
    if not batches:
        raise DiagnosticsError("inputs: expected at least one batch, got an empty iterable")
    return batches


def _kind(module):
    names = {cls.__name__ for cls in type(module).__mro__}
    for kind in ("Linear", "Conv2d"):
        if kind in names:
            return kind
    if names & set(ACTIVATIONS):
        return "activation"
    if names & set(PASS_THROUGH):
        return "pass"
    return "other"


def _trace_chains(backend, batch):
    """Run one forward pass, note the order leaf modules run in, and pair activations with their
    incoming and outgoing weight layers."""
    order, handles = [], []
    for name, module in backend.named_modules():
        if name and not any(True for _ in module.children()):
            handles.append(backend.add_forward_hook(module, _recorder(order, name)))
    try:
        with backend.no_grad():
            backend.forward(batch)
    finally:
        for handle in handles:
            handle.remove()
    modules = dict(backend.named_modules())
    chains, skipped = {}, {}
    calls = {}
    for name, _ in order:
        calls[name] = calls.get(name, 0) + 1
    for position, (name, shape) in enumerate(order):
        if _kind(modules[name]) != "activation" or name in chains or name in skipped:
            continue
        if calls[name] > 1:
            skipped[name] = f"runs {calls[name]} times in one forward pass"
            continue
        incoming = _neighbour(order, modules, position, step=-1)
        outgoing = _neighbour(order, modules, position, step=+1)
        why = _mismatch(modules, incoming, outgoing, shape)
        if why:
            skipped[name] = why
            continue
        axis = 1 if _kind(modules[incoming]) == "Conv2d" else len(shape) - 1
        chains[name] = _Chain(incoming=incoming, outgoing=outgoing, unit_axis=axis)
    return chains, skipped


def _recorder(order, name):
    def record(module, args, output):
        order.append((name, tuple(getattr(output, "shape", ()))))
    return record


def _neighbour(order, modules, position, *, step):
    """The nearest weight layer before (step -1) or after (+1), across pass-through layers."""
    index = position + step
    while 0 <= index < len(order):
        kind = _kind(modules[order[index][0]])
        if kind in ("Linear", "Conv2d"):
            return order[index][0]
        if kind != "pass":
            return None
        index += step
    return None


def _mismatch(modules, incoming, outgoing, shape):
    if incoming is None:
        return "no Linear or Conv2d directly before it"
    if outgoing is None:
        return "no Linear or Conv2d directly after it"
    source, target = modules[incoming], modules[outgoing]
    units = source.weight.shape[0]
    width = target.weight.shape[1]
    axis = 1 if _kind(source) == "Conv2d" else len(shape) - 1
    if len(shape) <= axis or shape[axis] != units or width != units:
        return (f"{incoming} -> {outgoing} do not line up unit for unit "
                f"({units} units, {outgoing} takes {width})")
    return ""


def _activity_scores(backend, batches, chains):
    """Per activation layer, each unit's mean |activation| over all batches over the layer mean."""
    sums = {name: 0.0 for name in chains}
    counts = {name: 0 for name in chains}
    handles = []

    def hook_for(name, axis):
        def hook(module, args, output):
            values = np.abs(backend.to_numpy(output).astype(np.float64))
            values = np.moveaxis(values, axis, -1).reshape(-1, values.shape[axis])
            sums[name] = sums[name] + values.sum(axis=0)
            counts[name] += values.shape[0]
        return hook

    modules = dict(backend.named_modules())
    for name, chain in chains.items():
        handles.append(backend.add_forward_hook(modules[name], hook_for(name, chain.unit_axis)))
    try:
        with backend.no_grad():
            for batch in batches:
                backend.forward(batch)
    finally:
        for handle in handles:
            handle.remove()
    scores = {}
    for name in chains:
        mean = np.asarray(sums[name]) / max(counts[name], 1)
        layer_mean = float(np.mean(mean))
        scores[name] = mean / layer_mean if layer_mean > 0 else np.zeros_like(mean)
    return scores


def _output(backend, batch):
    with backend.no_grad():
        output = backend.forward(batch)
    first = output[0] if isinstance(output, (tuple, list)) else output
    return backend.to_numpy(first).astype(np.float64)


def _reinitialise(backend, chain, units, *, optimizer, rng):
    """Kaiming-uniform rows and zero bias for ``units`` in the incoming layer, zero columns out."""
    if not len(units):
        return
    units = units.tolist()
    weight_name, bias_name = f"{chain.incoming}.weight", f"{chain.incoming}.bias"
    weight = backend.read_parameter(weight_name)
    fan_in = int(np.prod(weight.shape[1:]))
    bound = math.sqrt(3.0) * math.sqrt(2.0) / math.sqrt(fan_in)  # gain sqrt(2), as for ReLU
    weight[units] = rng.uniform(-bound, bound, (len(units),) + weight.shape[1:])
    backend.write_parameter(weight_name, weight)
    touched = [(weight_name, (units,))]
    params = dict(backend.named_parameters())
    if bias_name in params:
        bias = backend.read_parameter(bias_name)
        bias[units] = 0
        backend.write_parameter(bias_name, bias)
        touched.append((bias_name, (units,)))
    out_name = f"{chain.outgoing}.weight"
    out_weight = backend.read_parameter(out_name)
    out_weight[:, units] = 0
    backend.write_parameter(out_name, out_weight)
    touched.append((out_name, (slice(None), units)))
    if optimizer is not None:
        _reset_moments(optimizer, params, touched)


def _reset_moments(optimizer, params, touched):
    """Zero the optimizer's per-parameter buffers (momentum, Adam moments) at the touched
    entries."""
    for name, index in touched:
        param = params[name]
        state = optimizer.state.get(param) or {}
        for value in state.values():
            if tuple(getattr(value, "shape", ())) == tuple(param.shape):
                value[index] = 0


def _findings(report):
    findings = []
    for layer in report.layers:
        if layer.revived:
            findings.append(Finding(
                "DEAD_UNITS", "info", layer.name,
                f"revived {len(layer.revived)} of {layer.units} dead units (fresh incoming "
                f"weights in {layer.incoming}, zero outgoing weights in {layer.outgoing})",
                "find why they died: a learning rate too high, a large negative bias, or "
                "unnormalised inputs; revival treats the symptom",
                {"units": layer.units, "revived": layer.revived,
                 "still_dead": layer.dead_after}))
    return findings
