"""Each watched layer's output on sampled iterations, and which of its units stay silent.

A module called more than once in one model call (one ``nn.ReLU`` after two layers, a block
applied twice) gets a record per call: its first call under the module's name, the n-th under
``name#n`` (``act#2``), up to ``MAX_CALLS``; later calls fold into ``name#MAX_CALLS``. Each
call is its own row of the report and its own dead-unit check, so a dead second use is not
hidden by a live first one. The history and the sinks keep the first call (their columns are
fixed before the model runs).

Layers are recorded in training calls of the model (gradients on when it was called), also
where part of it runs under ``no_grad`` (a frozen backbone); a call of the whole model without
gradients is an evaluation pass and is left out. A compiled model is seen through a replay of
its module underneath (``monitor/compiled.py``).

A squashing layer (sigmoid, tanh) whose output *is* the model's output (itself, one of the
tensors of a tuple/list/dict output, or a view of one: ``.view(-1)``, ``.squeeze(1)``) is
the output layer: it goes straight into the loss. Those layers are published as
``OutputLayers``; saturation is judged on hidden layers only (``checks/activations.py``).

A plain ``ReLU`` applied to the output the previous hook just measured (a Linear's, a
BatchNorm's), unchanged since but by the ReLU itself, takes its unit extremes from that
measurement (``relu(max) = max(max, 0)``, exactly) instead of two more passes over the tensor.
"""
from dataclasses import dataclass

import numpy as np

from ..compiled import module_underneath, replay
from ..history import activation_columns
from ..records import ActivationRecord
from ..units import UnitActivity
from .base import Probe, Signal

MAX_CALLS = 8


@dataclass(frozen=True)
class OutputLayers(Signal):
    """Call names of the squashing layers (sigmoid, tanh) whose output is the model's."""

    names: frozenset[str]


@dataclass(frozen=True)
class CompiledReplay(Signal):
    """A compiled model's layers seen through an eager replay: how many sampled steps were
    replayed, what a replay raised (None: none did), how many layers it watches."""

    replays: int
    error: str | None
    layers: int


class ActivationsProbe(Probe):
    publishes = (OutputLayers, CompiledReplay)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.units = UnitActivity(min(ctx.window, ctx.thresholds.dead_samples))
        self._columns = [(layer, activation_columns(layer)) for layer in ctx.layout.layers]
        self._layers = list(ctx.layout.layers)   # one per module, in the model's order
        self._calls = {}              # layer name -> its module's calls in this model call
        self._call_layers = {}        # (layer name, n) -> the LayerInfo of the n-th call
        self._training_call = False   # inside a model call made with gradients on
        self._underneath = module_underneath(ctx.backend.model)
        self._replaying = False
        self._replayed = False        # this sampled iteration's replay is done
        self.replays = 0
        self.replay_error = None      # what the replay of a compiled model raised, if it did
        self._queued = []             # (sample, name, elements, results, source) for the
                                      # transfer; source: where a ReLU's extremes come from
        self._results = []            # their statistics, in the same order
        self._measured = None         # (tensor, its weights_token, where its unit max is in
                                      # _results): the latest output measured whole
        self._squashed = {}           # call name -> a sigmoid/tanh output of this model call
        self.output_layers = set()    # call names of squashing layers that gave the output

    def attach(self):
        backend = self.ctx.backend
        handles = [backend.add_forward_hook(backend.model, self._on_model_output)]
        if self._underneath is None:   # a compiled model's layers are hooked for the replay
            handles += self._layer_hooks()
        return handles

    def _layer_hooks(self):
        backend = self.ctx.backend
        return [backend.add_forward_hook(layer.module, self._hook(layer))
                for layer in self._layers]

    def begin(self):
        self._calls = {}
        self._replayed = self.replay_error is not None   # a replay that failed is not retried

    def on_forward(self, args, kwargs, grad_enabled):
        self._calls = {}
        self._measured = None
        self._training_call = grad_enabled and self.ctx.sample is not None
        if self._training_call and self._underneath is not None and not self._replayed:
            self._replayed = True
            self._replay(args, kwargs)

    def _on_model_output(self, module, args, output):
        squashed, self._squashed = self._squashed, {}
        if squashed and self._training_call:
            outputs = _tensors_in(output, self.ctx.backend.is_tensor)
            self.output_layers.update(name for name, tensor in squashed.items()
                                      if any(_same_values(tensor, o) for o in outputs))
        self._training_call = False
        self._measured = None
        return None

    def _replay(self, args, kwargs):
        handles = []
        self._replaying = True
        try:
            handles = self._layer_hooks()
            replay(self.ctx.backend, self._underneath, args, kwargs)
            self.replays += 1
        except Exception as error:   # the user's forward failed eagerly: say what is unseen
            self.replay_error = f"{type(error).__name__}: {error}"
        finally:
            self._replaying = False
            self._calls = {}
            for handle in reversed(handles):
                handle.remove()

    def _hook(self, layer):
        ctx = self.ctx

        def hook(module, args, output):
            sample = ctx.sample
            if sample is None or not (self._replaying or self._training_call
                                      or ctx.backend.grad_enabled()):
                return None
            tensor = ctx.first_tensor(output)
            if tensor is None:
                return None
            name = self._call_name(layer)
            if saturation is not None and name not in self.output_layers:
                self._squashed[name] = tensor
            source = self._rectified_from(args, tensor) if plain_relu else None
            if source is not None:
                stats = ctx.kernels.activation_statistics(tensor, extremes=False)
            else:
                stats = ctx.kernels.activation_statistics(tensor, saturation=saturation)
            if stats is None:
                return None
            self._queued.append((sample, name, tensor.numel(), len(stats), source))
            if source is None:
                self._measured = (tensor, ctx.kernels.weights_token(tensor),
                                  len(self._results) + 3)
            self._results += stats
            return None
        saturation = layer.saturation
        plain_relu = _is_plain_relu(layer.module)
        return hook

    def _rectified_from(self, args, output):
        """Where in ``_results`` the unit max of this ReLU's input lies, when that input is
        the output measured last and nothing but this ReLU (in place) wrote it since; else
        None."""
        measured = self._measured
        if measured is None or not args or args[0] is not measured[0] or measured[1] is None:
            return None
        tensor, token, where = measured
        kernels = self.ctx.kernels
        expected = kernels.token_after_writes(token, 1 if output is tensor else 0)
        return where if kernels.weights_token(tensor) == expected else None

    def contribute(self):
        """The layers' queued statistics, all in one entry of the transfer."""
        queued, results = self._queued, self._results
        self._measured = None
        if not queued:
            return
        self._queued, self._results = [], []

        def receive(parts):
            offset = 0
            for sample, name, count, size, source in queued:
                own = parts[offset:offset + size]
                if source is not None:   # relu(x)'s extremes: x's, clamped at 0 (NaN stays)
                    own = own + [np.maximum(parts[source], 0.0),
                                 np.maximum(parts[source + 1], 0.0)]
                sample.add_activation(name, ActivationRecord.from_parts(count, own))
                offset += size
        self.ctx.collector.add(results, receive)

    def _call_name(self, layer):
        """``layer.name`` for the module's first call in this model call, ``name#n`` after."""
        call = self._calls.get(layer.name, 0) + 1
        self._calls[layer.name] = call
        if call == 1:
            return layer.name
        call = min(call, MAX_CALLS)
        made = self._call_layers.get((layer.name, call))
        if made is None:
            made = self._call_layers[layer.name, call] = self.ctx.layout.call_layer(layer, call)
        return made.name

    def close(self):
        self._queued, self._results, self._measured, self._squashed = [], [], None, {}

    def finish(self, sample):
        for name, record in sample.activations.items():
            self.units.add(name, record)

    def view_fields(self):
        return {"units": self.units}

    def signals(self):
        published = (OutputLayers(frozenset(self.output_layers)),)
        if self._underneath is not None:
            published += (CompiledReplay(replays=self.replays, error=self.replay_error,
                                         layers=len(self._layers)),)
        return published

    def fill_row(self, row, sample, view):
        for layer, columns in self._columns:
            record = sample.activations.get(layer.name)
            if record is None:
                continue
            values = (record.mean, record.std, record.minimum, record.maximum,
                      record.zero_fraction, view.dead_fraction(layer), record.saturated_fraction)
            row.update(zip(columns, values))   # "saturated" only where the layer has a column


def _tensors_in(value, is_tensor, depth=0):
    """The tensors of a model output: itself, or those in its tuples, lists and dicts (two
    levels down)."""
    if is_tensor(value):
        return [value]
    if depth > 1:
        return []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors_in(v, is_tensor, depth + 1)]
    return []


def _same_values(tensor, output):
    """Whether ``output`` is ``tensor`` or a view of all of it (same elements, same memory)."""
    if output is tensor:
        return True
    numel = getattr(tensor, "numel", None)
    if not callable(numel) or numel() != output.numel():
        return False
    pointer = getattr(tensor, "data_ptr", None)
    if callable(pointer):                       # torch
        return pointer() == output.data_ptr()
    data, other = getattr(tensor, "data", None), getattr(output, "data", None)
    return (isinstance(data, np.ndarray) and isinstance(other, np.ndarray)   # minigrad
            and np.may_share_memory(data, other))


def _is_plain_relu(module):
    """torch's or minigrad's own ``nn.ReLU`` (not a subclass that may compute otherwise)."""
    cls = type(module)
    return cls.__name__ == "ReLU" and cls.__module__.startswith(("torch.nn.", "minigrad."))
