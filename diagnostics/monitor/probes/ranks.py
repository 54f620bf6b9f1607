"""Fingerprints for the cross-rank checks (``monitor.distributed``): the parameters and the
gradients the optimizer used at ``step()``, each parameter's local gradient as autograd
produced it (before DDP or a manual all-reduce touched it), the first input of the step, the
model's buffers as its first training forward of the step starts, and the buffers at the
first forward of the last evaluation pass.
The Monitor adds this probe only inside a torch.distributed job.

Buffers (batch-norm running statistics, EMA tables) are fingerprinted where the comparison is
exact, in the watched module's forward pre-hook, which runs inside DistributedDataParallel's
forward, after its ``broadcast_buffers`` copy of rank 0's buffers:

* training: the step's first training forward. The forward then updates the buffers with each
  rank's own batch, so at ``step()`` healthy DDP ranks differ; before the forward they are
  bit-identical. DDP skips that copy in the forward that follows a ``no_grad`` one (an
  evaluation pass), so the fingerprint is taken only in a grad-enabled forward whose previous
  forward was grad-enabled too.
* evaluation: the first forward of each evaluation pass (the root module not training, after a
  forward that was training or none), at any step, sampled or not; the latest is kept and
  travels in the row of the next sampled step (no collective of its own). In eval mode the
  forwards read the buffers without updating them, so this fingerprint is the statistics the
  whole pass evaluates with: DDP's copy, when it runs (after a grad-enabled forward), comes
  before the pre-hook, and when it does not (``broadcast_buffers=False``, a pass on the
  module inside DDP, the later forwards of a ``no_grad`` pass) the buffers stay as
  fingerprinted. What ranks evaluate with
  is what matters: a job that lets the buffers drift apart while training and averages them
  before each evaluation (timm's ``--no-ddp-bb --dist-bn reduce``) differs at the training
  fingerprint only.

When the Monitor holds the DDP wrapper and it broadcasts, the buffers are not compared at all
(``watch_buffers(False)``): DDP makes them equal before every forward.
Non-persistent buffers (caches such as rotary tables or masks, not in a checkpoint) are left
out: they may legitimately follow each rank's sequence lengths; so are the buffers a user told
DDP to leave rank-local (``_ddp_params_and_buffers_to_ignore``).
"""
from ..distributed import fingerprint
from .base import Probe


def persistent_buffers(model):
    """``[(name, module, key)]`` of every persistent buffer of a torch module (the module and
    its key, so a buffer the model reassigns is still read)."""
    found, seen = [], set()
    rank_local = set(getattr(model, "_ddp_params_and_buffers_to_ignore", ()) or ())
    for prefix, module in model.named_modules():
        skip = getattr(module, "_non_persistent_buffers_set", set())
        for key, buffer in getattr(module, "_buffers", {}).items():
            name = f"{prefix}.{key}" if prefix else key
            if buffer is None or key in skip or id(buffer) in seen or name in rank_local:
                continue
            seen.add(id(buffer))
            found.append((name, module, key))
    return found


class RanksProbe(Probe):
    # last: its fingerprints are of the iteration as every other probe left it (an evaluation
    # replay has put the buffers back), and they are the row the rank exchange sends
    runs_last = True

    def __init__(self, ctx):
        super().__init__(ctx)
        self._params = list(ctx.layout.trainable)
        self._buffers = persistent_buffers(ctx.backend.model)
        self._local = {}       # parameter name -> fingerprint of its local gradient (summed)
        self._input = None
        self._buffer_prints = None
        self._after_grad = True    # the model's previous forward ran with gradients enabled
        self._evaluating = False   # the model's previous forward ran in eval mode
        self._eval_prints = None   # the buffers at the first forward of the last evaluation
        self._eval_step = None     # pass, and the step under way then
        self._queued = None
        self.last = {}         # the latest sampled step's fingerprints, as NumPy arrays

    @property
    def buffer_names(self):
        return [name for name, _, _ in self._buffers]

    def watch_buffers(self, watch):
        """Compare the buffers across ranks (True) or not (a DDP wrapper that broadcasts)."""
        if not watch:
            self._buffers = []

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
        self._local, self._input, self._buffer_prints = {}, None, None
        self._queued, self.last = None, {}

    def on_forward(self, args, kwargs, grad_enabled):
        after_grad, self._after_grad = self._after_grad, grad_enabled
        evaluating = not getattr(self.ctx.backend.model, "training", True)
        starts_evaluation, self._evaluating = evaluating and not self._evaluating, evaluating
        if starts_evaluation and self._buffers:
            self._eval_prints, self._eval_step = self._fingerprint_buffers(), self.ctx.step
        if self.ctx.sample is None or not grad_enabled:
            return
        if self._buffer_prints is None and after_grad and self._buffers:
            self._buffer_prints = self._fingerprint_buffers()
        if self._input is None:
            is_tensor = self.ctx.backend.is_tensor
            tensor = next((a for a in (*args, *kwargs.values()) if is_tensor(a)), None)
            if tensor is not None:
                self._input = fingerprint(tensor)

    def _fingerprint_buffers(self):
        import torch

        prints = []
        for _, module, key in self._buffers:
            buffer = module._buffers.get(key)
            prints.append(fingerprint(buffer) if buffer is not None
                          else torch.full((3,), float("nan"), dtype=torch.float64))
        device = prints[0].device
        return torch.stack([p.to(device) for p in prints])

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
        self._queued = {key: torch.stack([t.to(device) for t in part])
                        for key, part in (("params", params), ("local", local),
                                          ("final", final))}
        if self._input is not None:
            self._queued["inputs"] = self._input.to(device)
        if self._buffer_prints is not None:
            self._queued["buffers"] = self._buffer_prints.to(device)
        if self._eval_prints is not None:
            self._queued["eval_buffers"] = self._eval_prints.to(device)
            self._queued["eval_step"] = torch.tensor([float(self._eval_step)],
                                                     dtype=torch.float64, device=device)
        return False

    def contribute(self):
        queued, self._queued = self._queued, None
        if not queued:
            return
        keys = list(queued)

        def receive(arrays):
            got = dict(zip(keys, arrays))
            self.last = {"params": got["params"].reshape(-1, 3),
                         "local": got["local"].reshape(-1, 3),
                         "final": got["final"].reshape(-1, 3),
                         "inputs": got.get("inputs"), "buffers": got.get("buffers"),
                         "eval_buffers": got.get("eval_buffers"),
                         "eval_step": got.get("eval_step")}
        self.ctx.collector.add(list(queued.values()), receive)

    def close(self):
        self._local, self._input, self._buffer_prints = {}, None, None
        self._eval_prints, self._eval_step = None, None
        self._queued, self.last = None, {}
