"""The model's output on sampled iterations: its width (classes) and prediction entropy."""
import math

from .base import Probe


class OutputsProbe(Probe):

    def attach(self):
        return [self.ctx.backend.add_forward_hook(self.ctx.backend.model, self._on_output)]

    def _on_output(self, module, args, output):
        ctx, sample = self.ctx, self.ctx.sample
        if sample is not None and ctx.backend.grad_enabled():
            tensor = ctx.first_tensor(output)
            if tensor is not None and len(tensor.shape) >= 2:
                sample.output_width = int(tensor.shape[-1])
                self._queue_entropy(sample, tensor)
        return None

    def _queue_entropy(self, sample, tensor):
        """The mean entropy of the output's softmax, when it looks like class scores (a
        floating output of C >= 2 columns): the first model call of the iteration only."""
        if sample.output_entropy is not None:
            return
        entropy = self.ctx.kernels.prediction_entropy(tensor)
        if entropy is None:
            return
        sample.output_entropy = math.nan   # queued; the transfer fills it in

        def receive(parts):
            sample.output_entropy = float(parts[0])
        self.ctx.collector.add((entropy,), receive)
