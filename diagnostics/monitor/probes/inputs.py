"""The model's input on sampled iterations: its statistics and the batch size."""
from .activations import queue_activation
from .base import Probe


class InputsProbe(Probe):

    def on_forward(self, args, kwargs, grad_enabled):
        """The input is the first tensor among the positional, then the keyword arguments
        (``model(**batch)``)."""
        sample = self.ctx.sample
        if sample is None or not grad_enabled:
            return
        is_tensor = self.ctx.backend.is_tensor
        tensor = next((a for a in (*args, *kwargs.values()) if is_tensor(a)), None)
        if tensor is None:
            return
        if sample.batch is None:
            sample.batch = int(tensor.shape[0]) if len(tensor.shape) else 1

        def receive(record):
            sample.inputs = record if sample.inputs is None else sample.inputs.merge(record)
        queue_activation(self.ctx, tensor, None, receive)

    def fill_row(self, row, sample, view):
        inputs = sample.inputs
        if inputs is not None:
            row.update({"input/mean": inputs.mean, "input/std": inputs.std,
                        "input/min": inputs.minimum, "input/max": inputs.maximum})
