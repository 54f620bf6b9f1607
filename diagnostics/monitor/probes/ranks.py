"""Fingerprints for the cross-rank checks (``monitor.distributed``): the parameters and the
gradients the optimizer used at ``step()``, each parameter's local gradient as autograd
produced it (before DDP or a manual all-reduce touched it), and the first input of the step.
The Monitor adds this probe only inside a torch.distributed job."""
from ..distributed import fingerprint
from .base import Probe


class RanksProbe(Probe):

    def __init__(self, ctx):
        super().__init__(ctx)
        self._params = list(ctx.layout.trainable)
        self._local = {}       # parameter name -> fingerprint of its local gradient (summed)
        self._input = None
        self._queued = None
        self.last = {}         # the latest sampled step's fingerprints, as NumPy arrays

    def attach(self):
        backend = self.ctx.backend
        return [backend.add_tensor_hook(param.tensor, self._hook(param.name))
                for param in self._params]

    def _hook(self, name):
        def hook(grad):
            if self.ctx.sample is not None:
                value = fingerprint(grad)
                known = self._local.get(name)
                self._local[name] = value if known is None else known + value
            return None
        return hook

    def begin(self):
        self._local, self._input, self._queued, self.last = {}, None, None, {}

    def on_forward(self, args, kwargs, grad_enabled):
        if self.ctx.sample is None or not grad_enabled or self._input is not None:
            return
        is_tensor = self.ctx.backend.is_tensor
        tensor = next((a for a in (*args, *kwargs.values()) if is_tensor(a)), None)
        if tensor is not None:
            self._input = fingerprint(tensor)

    def on_step(self, loss):
        if self.ctx.sample is None or not self._params:
            return False
        import torch

        params = [fingerprint(p.tensor) for p in self._params]
        nan = params[0].new_full((3,), float("nan"))
        final = [fingerprint(p.tensor.grad) if p.tensor.grad is not None else nan
                 for p in self._params]
        local = [self._local.get(p.name, nan) for p in self._params]
        device = params[0].device
        self._queued = [torch.stack([t.to(device) for t in part])
                        for part in (params, local, final)]
        if self._input is not None:
            self._queued.append(self._input.to(device))
        return False

    def contribute(self):
        queued, self._queued = self._queued, None
        if not queued:
            return
        has_input = len(queued) == 4

        def receive(arrays):
            self.last = {"params": arrays[0].reshape(-1, 3), "local": arrays[1].reshape(-1, 3),
                         "final": arrays[2].reshape(-1, 3),
                         "inputs": arrays[3] if has_input else None}
        self.ctx.collector.add(queued, receive)

    def close(self):
        self._local, self._input, self._queued, self.last = {}, None, None, {}
