"""Each watched layer's output on sampled iterations, and which of its units stay silent."""
import math

from ..history import activation_columns
from ..records import ActivationRecord
from ..units import UnitActivity
from .base import Probe


def queue_activation(ctx, tensor, saturation, receive):
    """Queue ``tensor``'s statistics; ``receive(ActivationRecord)`` after the transfer."""
    stats = ctx.kernels.activation_statistics(tensor, saturation=saturation)
    if stats is None:
        return
    count = math.prod(tensor.shape)
    ctx.collector.add(stats, lambda parts: receive(ActivationRecord.from_parts(count, parts)))


class ActivationsProbe(Probe):

    def __init__(self, ctx):
        super().__init__(ctx)
        self.units = UnitActivity(min(ctx.window, ctx.thresholds.dead_samples))
        self._columns = [(layer, activation_columns(layer)) for layer in ctx.layout.layers]

    def attach(self):
        backend = self.ctx.backend
        return [backend.add_forward_hook(layer.module, self._hook(layer))
                for layer in self.ctx.layout.layers]

    def _hook(self, layer):
        ctx, name = self.ctx, layer.name

        def hook(module, args, output):
            sample = ctx.sample
            if sample is not None and ctx.backend.grad_enabled():
                tensor = ctx.first_tensor(output)
                if tensor is not None:
                    queue_activation(ctx, tensor, layer.saturation,
                                     lambda record: sample.add_activation(name, record))
            return None
        return hook

    def finish(self, sample):
        for name, record in sample.activations.items():
            self.units.add(name, record)

    def view_fields(self):
        return {"units": self.units}

    def fill_row(self, row, sample, view):
        for layer, columns in self._columns:
            record = sample.activations.get(layer.name)
            if record is None:
                continue
            values = (record.mean, record.std, record.minimum, record.maximum,
                      record.zero_fraction, view.dead_fraction(layer), record.saturated_fraction)
            row.update(zip(columns, values))   # "saturated" only where the layer has a column
