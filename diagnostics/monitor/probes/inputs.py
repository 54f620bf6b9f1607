"""The model's input on sampled iterations: its statistics and the batch size.

The statistics are those of the input as the first layer with weights sees it: the first
tensor passed to the first module with parameters of its own that runs in the model call
(normalisation layers left aside: they standardise what they get). A model that divides its
0..255 frames by 255, or standardises them, before its first layer is fed normalised data;
raw pixels into a Linear or Conv are not. Without such a module, and for a compiled model
(whose inner modules the Monitor never hooks: ``monitor/compiled.py``), the model's input is
measured.

The model's input (for the batch size) is the first tensor among the positional arguments. A
model called with keywords only (``model(**batch)``) has its input under a conventional name:
the first of ``INPUT_NAMES`` present (Hugging Face's ``input_ids``, ``pixel_values``, ...),
else the first floating tensor among the keywords, else the first tensor (a mask or the labels
tell nothing about the data).
Token ids give the batch size but no statistics (they are not floating).

A model fed a list, tuple or dict (``model({"x": x, "adj": adj})``) has its input found inside
by the same rules. A sparse tensor (COO or CSR: a graph's adjacency) is structure, not data
to standardise: the first dense floating tensor beside it is measured instead (a GCN layer's
node features), and a sparse tensor alone is not measured.
"""
import math
from collections.abc import Mapping
from dataclasses import dataclass

from ..compiled import module_underneath
from ..records import ActivationRecord
from .base import Probe, Signal, dense, floating

INPUT_NAMES = ("input_ids", "inputs_embeds", "pixel_values", "input_values", "input_features",
               "inputs", "input", "x")


def input_tensor(backend, args, kwargs, *, depth=2):
    """The tensor that is the model's input in ``model(*args, **kwargs)``, or None; a list,
    tuple or dict argument is searched by the same rules, ``depth`` levels down."""
    is_tensor = backend.is_tensor
    positional = [a for a in args if is_tensor(a)]
    if positional:
        return next((a for a in positional if dense(a)), positional[0])
    named = next((kwargs[k] for k in INPUT_NAMES if k in kwargs and is_tensor(kwargs[k])), None)
    if named is not None:
        return named
    tensors = [v for v in kwargs.values() if is_tensor(v)]
    floats = [t for t in tensors if floating(t)]
    found = next((t for t in floats if dense(t)), None)
    found = found if found is not None else (floats or tensors or [None])[0]
    if found is not None or depth == 0:
        return found
    for value in (*args, *kwargs.values()):
        inner = _inside(backend, value, depth - 1)
        if inner is not None:
            return inner
    return None


def _inside(backend, value, depth):
    """The input held by a list, tuple or dict argument (a batch passed whole), or None."""
    if isinstance(value, Mapping):
        return input_tensor(backend, (), {k: v for k, v in value.items() if isinstance(k, str)},
                            depth=depth)
    if isinstance(value, (tuple, list)):
        return input_tensor(backend, tuple(value), {}, depth=depth)
    return None


def layer_input(backend, args):
    """The tensor a layer's input is measured on: its first positional tensor, but when that
    one is sparse (a graph convolution's adjacency) the first dense floating tensor among its
    arguments (the node features), else None."""
    is_tensor = backend.is_tensor
    flat = [a for a in args if is_tensor(a)] or [
        i for a in args if isinstance(a, (tuple, list)) for i in a if is_tensor(i)]
    if not flat:
        return None
    if dense(flat[0]):
        return flat[0]
    return next((t for t in flat if dense(t) and floating(t)), None)



@dataclass(frozen=True)
class InputLayer(Signal):
    """The layer whose input was measured last: the first with weights ("" the model
    itself), None when the model's input was measured before any layer."""

    name: str | None


class InputsProbe(Probe):
    publishes = (InputLayer,)

    def __init__(self, ctx):
        super().__init__(ctx)
        compiled = module_underneath(ctx.backend.model) is not None   # no hook inside it
        self._layers = [] if compiled else _weighing_layers(ctx.backend.named_modules(),
                                                            ctx.layout.params)
        self._awaiting = False    # a sampled model call whose first layer has not run yet
        self.layer = None         # the name of the layer whose input was measured last

    def attach(self):
        add = self.ctx.backend.add_forward_pre_hook
        return [add(module, self._layer_hook(name)) for name, module in self._layers]

    def on_forward(self, args, kwargs, grad_enabled):
        sample = self.ctx.sample
        self._awaiting = False
        if sample is None or not grad_enabled:
            return
        tensor = input_tensor(self.ctx.backend, args, kwargs)
        if tensor is None:
            return
        if sample.batch is None:
            sample.batch = int(tensor.shape[0]) if len(tensor.shape) else 1
        if self._layers:
            self._awaiting = True
        else:
            self._measure(sample, tensor)

    def _layer_hook(self, name):
        def hook(module, args):
            sample = self.ctx.sample
            if not self._awaiting or sample is None:
                return None
            self._awaiting = False
            tensor = layer_input(self.ctx.backend, args)
            if tensor is not None:
                self.layer = name
                self._measure(sample, tensor)
            return None
        return hook

    def _measure(self, sample, tensor):
        stats = self.ctx.kernels.input_statistics(tensor)
        if stats is None:
            return
        count = math.prod(tensor.shape)

        def receive(parts):
            record = ActivationRecord.from_parts(count, parts, zeros=False)
            sample.inputs = record if sample.inputs is None else sample.inputs.merge(record)
        self.ctx.collector.add(stats, receive)

    def signals(self):
        return (InputLayer(self.layer),)

    def fill_row(self, row, sample, view):
        inputs = sample.inputs
        if inputs is not None:
            row.update({"input/mean": inputs.mean, "input/std": inputs.std,
                        "input/min": inputs.minimum, "input/max": inputs.maximum})


def _weighing_layers(modules, params):
    """``(name, module)`` of the modules with parameters of their own, normalisation layers
    left aside; the model's root only when no module below it has any."""
    owners = {p.module_name for p in params}
    found = [(name, module) for name, module in modules
             if name in owners and not _normalises(module)]
    below = [(name, module) for name, module in found if name != ""]
    return below or found


def _normalises(module):
    """A BatchNorm, LayerNorm, GroupNorm, RMSNorm...: it standardises its own input."""
    return any(cls.__name__.endswith("Norm") or cls.__name__.startswith(("BatchNorm", "_Norm"))
               for cls in type(module).__mro__)
