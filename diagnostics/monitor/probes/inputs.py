"""The model's input on sampled iterations: its statistics and the batch size.

The input is the first tensor among the positional arguments. A model called with keywords
only (``model(**batch)``) has its input under a conventional name: the first of ``INPUT_NAMES``
present (Hugging Face's ``input_ids``, ``pixel_values``, ...), else the first floating tensor
among the keywords, else the first tensor (a mask or the labels tell nothing about the data).
Token ids give the batch size but no statistics (they are not floating).
"""
import math

from ..records import ActivationRecord
from .base import Probe, floating

INPUT_NAMES = ("input_ids", "inputs_embeds", "pixel_values", "input_values", "input_features",
               "inputs", "input", "x")


def input_tensor(backend, args, kwargs):
    """The tensor that is the model's input in ``model(*args, **kwargs)``, or None."""
    is_tensor = backend.is_tensor
    positional = next((a for a in args if is_tensor(a)), None)
    if positional is not None:
        return positional
    named = next((kwargs[k] for k in INPUT_NAMES if k in kwargs and is_tensor(kwargs[k])), None)
    if named is not None:
        return named
    tensors = [v for v in kwargs.values() if is_tensor(v)]
    floats = [t for t in tensors if floating(t)]
    return (floats or tensors or [None])[0]



class InputsProbe(Probe):

    def on_forward(self, args, kwargs, grad_enabled):
        sample = self.ctx.sample
        if sample is None or not grad_enabled:
            return
        tensor = input_tensor(self.ctx.backend, args, kwargs)
        if tensor is None:
            return
        if sample.batch is None:
            sample.batch = int(tensor.shape[0]) if len(tensor.shape) else 1

        stats = self.ctx.kernels.input_statistics(tensor)
        if stats is None:
            return
        count = math.prod(tensor.shape)

        def receive(parts):
            record = ActivationRecord.from_parts(count, parts, zeros=False)
            sample.inputs = record if sample.inputs is None else sample.inputs.merge(record)
        self.ctx.collector.add(stats, receive)

    def fill_row(self, row, sample, view):
        inputs = sample.inputs
        if inputs is not None:
            row.update({"input/mean": inputs.mean, "input/std": inputs.std,
                        "input/min": inputs.minimum, "input/max": inputs.maximum})
