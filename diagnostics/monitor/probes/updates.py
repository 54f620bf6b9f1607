"""What the optimizer did to each parameter on a sampled iteration: |Δw| / |w|.

A sample of the weights is copied when the parameter's first gradient arrives (before the
optimizer steps) and compared with the weights at the next model call, once it has stepped.
"""
from ..history import update_column
from ..records import UpdateRecord
from .base import Probe


class UpdatesProbe(Probe):

    def __init__(self, ctx):
        super().__init__(ctx)
        self.last = {}            # parameter name -> the latest UpdateRecord
        self._copies = {}         # parameter name -> weight sample buffer, reused
        self._arrivals = {}       # this iteration's copies, by parameter name
        self._pending = []        # (sample, param, copy) waiting for the optimizer's step
        self._params = {p.name: p for p in ctx.layout.trainable}
        self._columns = [(param.name, update_column(param)) for param in ctx.layout.trainable]

    def attach(self):
        backend = self.ctx.backend
        return [backend.add_tensor_hook(param.tensor, self._hook(param))
                for param in self.ctx.layout.trainable]

    def begin(self):
        self._arrivals = {}

    def _hook(self, param):
        name = param.name

        def hook(grad):
            if self.ctx.sample is not None and name not in self._arrivals:
                copy = self.ctx.kernels.weight_sample(param.tensor, into=self._copies.get(name))
                self._copies[name] = self._arrivals[name] = copy
            return None
        return hook

    def on_forward(self, args, kwargs, grad_enabled):
        if self._pending:
            self.contribute()

    def contribute(self):
        """Measure |Δw| of the last sampled step: called once the optimizer has stepped."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        params = [param.tensor for _, param, _ in pending]
        results = self.ctx.kernels.update_statistics_many(params, [b for _, _, b in pending])
        self.ctx.collector.add(results, lambda parts: self._receive(pending, parts))

    def _receive(self, pending, parts):
        count = len(pending)
        for (sample, param, _), delta, weight in zip(pending, parts[:count], parts[count:]):
            record = UpdateRecord(delta, weight)
            sample.updates[param.name] = record
            self.last[param.name] = record

    def finish(self, sample):
        """Hand this iteration's weight copies to the measurement at the next model call
        (none for a step the GradScaler skipped: the optimizer did not run)."""
        if not sample.skipped:
            self._pending += [(sample, self._params[name], before)
                              for name, before in self._arrivals.items()]
        self._arrivals = {}

    def fill_row(self, row, sample, view):
        for name, column in self._columns:
            update = self.last.get(name)
            if update is not None:
                row[column] = update.ratio

    def report_fields(self):
        return {"last_updates": dict(self.last)}

    def close(self):
        self._arrivals, self._pending, self._copies = {}, [], {}
