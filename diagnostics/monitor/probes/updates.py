"""What the optimizer did to each parameter on a sampled iteration: |Δw| / |w|.

A sample of the weights is copied when the iteration's first gradient arrives (before any
optimizer steps: backward is still running), all parameters in one fused copy, and compared
at the next model call, once the optimizer has stepped, for the parameters that got a gradient.
A parameter larger than the sample also has its gradient's largest |entry| on the sampled
entries taken
(``Sample.sampled_gradients``): an embedding's sparse gradient may miss them all, and then an
unmoved sample says nothing about the optimizer.
"""
from ..history import update_column
from ..records import UpdateRecord
from .base import Probe


class UpdatesProbe(Probe):

    def __init__(self, ctx):
        super().__init__(ctx)
        self.last = {}            # parameter name -> the latest UpdateRecord
        self._trainable = list(ctx.layout.trainable)
        self._tensors = [p.tensor for p in self._trainable]
        self._copies = None       # weight sample buffers of every trainable one, reused
        self._arrived = set()     # names of the parameters with a gradient this iteration
        self._pending = []        # (sample, param, copy) waiting for the optimizer's step
        self._columns = [(param.name, update_column(param)) for param in self._trainable]
        self._partly = {p.name for p in self._trainable
                        if ctx.kernels.samples_partly(p.tensor)}   # sampled, not whole

    def attach(self):
        backend = self.ctx.backend
        return [backend.add_tensor_hook(param.tensor, self._hook(param.name))
                for param in self._trainable]

    def begin(self):
        self._arrived = set()

    def _hook(self, name):
        partly = name in self._partly

        def hook(grad):
            ctx = self.ctx
            sample = ctx.sample
            if sample is None or name in self._arrived:
                return None
            if not self._arrived:   # the first gradient: no optimizer has stepped yet
                self._copies = ctx.kernels.weight_samples(self._tensors, into=self._copies)
            self._arrived.add(name)
            if partly:
                ctx.collector.add((ctx.kernels.sample_largest(grad),), lambda parts: (
                    sample.sampled_gradients.__setitem__(name, parts[0])))
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
        if not sample.skipped and self._arrived:
            self._pending += [(sample, param, copy)
                              for param, copy in zip(self._trainable, self._copies)
                              if param.name in self._arrived]
        self._arrived = set()

    def fill_row(self, row, sample, view):
        for name, column in self._columns:
            update = self.last.get(name)
            if update is not None:
                row[column] = update.ratio

    def report_fields(self):
        return {"last_updates": dict(self.last)}

    def close(self):
        self._arrived, self._pending, self._copies = set(), [], None
