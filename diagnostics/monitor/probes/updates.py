"""What the optimizer did to each parameter on a sampled iteration: |Δw| / |w|.

A sample of the weights is copied when the iteration's first gradient arrives (before any
optimizer steps: backward is still running), all parameters in one fused copy, and compared
at the next model call, once the optimizer has stepped, for the parameters that got a gradient.
That comparison copies the weights now; when the next iteration is sampled too (``every=1``)
and a parameter's ``weights_token`` has not moved since, that copy is its sample before the
step: nothing is copied again at the first gradient.
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
        self._tokens = [None] * len(self._tensors)   # weights_token when copies[i] was taken,
                                                     # None while copies[i] is not a sample
        self._spares = None       # buffers the comparison copies the weights now into
        self._arrived = set()     # names of the parameters with a gradient this iteration
        self._pending = []        # (sample, index) waiting for the optimizer's step
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
                self._copy_weights()
            self._arrived.add(name)
            if partly:
                ctx.collector.add((ctx.kernels.sample_largest(grad),), lambda parts: (
                    sample.sampled_gradients.__setitem__(name, parts[0])))
            return None
        return hook

    def _copy_weights(self):
        """Bring ``_copies`` to the weights now: only the ones whose token moved."""
        kernels, tensors = self.ctx.kernels, self._tensors
        now = [kernels.weights_token(t) for t in tensors]
        if self._copies is None:
            self._copies = kernels.weight_samples(tensors)
        else:
            stale = [i for i, token in enumerate(now)
                     if token is None or token != self._tokens[i]]
            if stale:
                copies = kernels.weight_samples([tensors[i] for i in stale],
                                                into=[self._copies[i] for i in stale])
                for i, copy in zip(stale, copies):
                    self._copies[i] = copy
        self._tokens = now

    def on_forward(self, args, kwargs, grad_enabled):
        if self._pending:
            self.contribute()

    def contribute(self):
        """Measure |Δw| of the last sampled step: called once the optimizer has stepped."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        indices = [i for _, i in pending]
        kernels, tensors = self.ctx.kernels, self._tensors
        if self._spares is None:
            self._spares = [None] * len(tensors)
        nows = [self._spares[i] for i in indices]
        befores = [self._copies[i] for i in indices]
        results = kernels.update_statistics_many([tensors[i] for i in indices], befores,
                                                 nows=nows)
        for i, now, before in zip(indices, nows, befores):   # the weights now are the next
            self._copies[i], self._spares[i] = now, before    # step's sample before it
            self._tokens[i] = kernels.weights_token(tensors[i])
        self.ctx.collector.add(results, lambda parts: self._receive(pending, parts))

    def _receive(self, pending, parts):
        count = len(pending)
        for (sample, i), delta, weight in zip(pending, parts[:count], parts[count:]):
            name = self._trainable[i].name
            record = UpdateRecord(delta, weight)
            sample.updates[name] = record
            self.last[name] = record

    def finish(self, sample):
        """Hand this iteration's weight copies to the measurement at the next model call
        (none for a step the GradScaler skipped: the optimizer did not run)."""
        if not sample.skipped and self._arrived:
            pending = [(sample, i) for i, param in enumerate(self._trainable)
                       if param.name in self._arrived]
            for _, i in pending:         # its copy is the comparison's until it is made
                self._tokens[i] = None
            self._pending += pending
        self._arrived = set()

    def fill_row(self, row, sample, view):
        for name, column in self._columns:
            update = self.last.get(name)
            if update is not None:
                row[column] = update.ratio

    def report_fields(self):
        return {"last_updates": dict(self.last)}

    def close(self):
        self._arrived, self._pending, self._copies, self._spares = set(), [], None, None
        self._tokens = [None] * len(self._tensors)
