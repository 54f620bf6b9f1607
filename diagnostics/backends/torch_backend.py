"""The backend for ``torch.nn.Module`` models. torch is imported only when such a model arrives."""
import contextlib
import copy
import random
import sys

import numpy as np

from .base import Backend

# torch files a hook under one key in a main dict and, with some options, in side dicts
_TORCH_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                     "_backward_pre_hooks")
_TORCH_HOOK_SIDE_DICTS = ("_forward_hooks_with_kwargs", "_forward_hooks_always_called",
                          "_forward_pre_hooks_with_kwargs")


class TorchBackend(Backend):
    name = "torch"
    HOOK_DICTS = _TORCH_HOOK_DICTS
    HOOK_SIDE_DICTS = _TORCH_HOOK_SIDE_DICTS

    def __init__(self, model):
        import torch

        self.torch = torch
        self._scratch_buffers = {}
        super().__init__(model)

    @staticmethod
    def accepts(model):
        torch = sys.modules.get("torch")
        return torch is not None and isinstance(model, torch.nn.Module)

    def is_tensor(self, value):
        return isinstance(value, self.torch.Tensor)

    def on_host(self, tensor):
        return tensor.device.type == "cpu"

    # ----------------------------------------------------------------- arrays
    def to_numpy(self, tensor):
        tensor = tensor.detach()
        if tensor.dtype in (self.torch.bfloat16, self.torch.float16):
            tensor = tensor.float()
        return tensor.cpu().numpy().copy()

    def from_numpy(self, array, *, like=None):
        tensor = self.torch.from_numpy(np.ascontiguousarray(array))
        return tensor if like is None else tensor.to(like.device)

    def write_parameter(self, name, array):
        param = self.parameter(name)
        with self.torch.no_grad():
            param.copy_(self.torch.from_numpy(np.ascontiguousarray(array)))

    # ---------------------------------------------------------------- running
    def no_grad(self):
        return self.torch.no_grad()

    def enable_grad(self):
        return self.torch.enable_grad()

    def grad_enabled(self):
        return self.torch.is_grad_enabled()

    def scalar(self, tensor):
        if not self.is_tensor(tensor):
            return float(tensor)
        if tensor.numel() == 1:
            return float(tensor.item())     # 5x faster than indexing, in a training loop
        return float(tensor.detach().reshape(-1)[0])

    # ------------------------------------------------------------------ hooks
    def add_tensor_hook(self, tensor, hook):
        return _TensorHookHandle(tensor, hook)

    # ------------------------------------------------------------- statistics
    def activation_statistics(self, tensor, *, saturation=None):
        torch = self.torch
        x = tensor.detach()
        if x.numel() == 0 or not x.is_floating_point():
            return None
        x = self._reducible(x)
        flat = x.reshape(-1)
        if x.dim() < 2:
            unit_max, unit_min = flat.amax().reshape(1), flat.amin().reshape(1)
        else:
            dims = 0 if x.dim() == 2 else (0,) + tuple(range(2, x.dim()))
            unit_max, unit_min = x.amax(dim=dims), x.amin(dim=dims)
        scratch = self._scratch(flat)
        # 3x faster than count_nonzero on the CPU; NaN counts as nonzero (sign(NaN) is 0)
        nonzero = torch.abs(flat, out=scratch).nan_to_num_(nan=1.0).sign_().sum()
        stats = (flat.sum(), torch.dot(flat, flat), nonzero, unit_max, unit_min)
        if saturation is None:
            return stats
        center, radius = saturation
        saturated = torch.sub(flat, center, out=scratch).abs_().sub_(radius).clamp_(min=0)
        return stats + (saturated.sign_().sum(),)

    def prediction_entropy(self, tensor):
        x = tensor.detach()
        if x.numel() == 0 or x.dim() == 0 or x.shape[-1] < 2 or not x.is_floating_point():
            return None
        log_p = self.torch.log_softmax(self._reducible(x), dim=-1)
        return -(log_p.exp() * log_p).sum(dim=-1).mean()

    def gradient_statistics(self, grad, *, per_unit=False):
        flat = self._reducible(grad.detach()).reshape(-1)
        if flat.numel() == 0:
            return (flat.new_zeros(()),) * 3
        magnitude = self.torch.abs(flat, out=self._scratch(flat))
        if not per_unit or grad.dim() == 0:
            largest = magnitude.amax()
        elif grad.dim() == 1:
            largest = magnitude.clone()    # the scratch buffer is used again
        else:
            largest = magnitude.view(grad.shape[0], -1).amax(dim=1)
        return (self.torch.dot(flat, flat), magnitude.sum(), largest)

    def weight_sample(self, param, *, into=None):
        entries = self._sampled(param)
        fits = (into is not None and into.shape == entries.shape and into.dtype == entries.dtype
                and into.device == entries.device)
        return into.copy_(entries) if fits else entries.clone()

    def update_statistics(self, param, before):
        now = self._reducible(self._sampled(param))
        delta = self._reducible(before).sub_(now)
        norm = self.torch.linalg.vector_norm
        return (norm(delta), norm(now))

    def _sampled(self, param):
        flat = param.detach().reshape(-1)
        plan = self._sample_stride(flat.numel())
        if plan is None:
            return flat
        blocks, stride = plan
        return flat[:blocks * self.SAMPLE_BLOCK].view(blocks, self.SAMPLE_BLOCK)[::stride]

    def gather(self, results):
        if not results:
            return []
        torch, device = self.torch, results[0].device
        results = [t if t.device == device else t.to(device) for t in results]
        scalars = [i for i, t in enumerate(results) if t.dim() == 0]
        vectors = [i for i, t in enumerate(results) if t.dim() != 0]
        parts = [torch.stack([results[i] for i in scalars])] if scalars else []
        parts += [results[i].reshape(-1) for i in vectors]
        flat = torch.cat(parts).to(torch.float64).cpu().numpy()   # the one synchronisation
        arrays = [None] * len(results)
        for index, value in zip(scalars, flat[:len(scalars)].tolist()):
            arrays[index] = value
        offset = len(scalars)
        for index in vectors:
            size = results[index].numel()
            arrays[index] = flat[offset:offset + size]
            offset += size
        return arrays

    def release_scratch(self):
        self._scratch_buffers = {}

    def _scratch(self, like):
        """A reusable buffer for elementwise temporaries (no allocation per statistic)."""
        key = (like.dtype, like.device)
        buffer = self._scratch_buffers.get(key)
        if buffer is None or buffer.numel() < like.numel():
            buffer = self._scratch_buffers[key] = self.torch.empty(like.numel(), dtype=like.dtype,
                                                     device=like.device)
        return buffer[:like.numel()]

    def _saved_state(self, node):
        for attr in dir(node):
            if not attr.startswith("_saved_"):
                continue
            try:
                value = getattr(node, attr)
            except RuntimeError:  # "... saved tensors after they have already been freed"
                return False
            if isinstance(value, self.torch.Tensor):
                return True
        return None

    def _node_inputs(self, node):
        return [child for child, _ in node.next_functions]

    def _reducible(self, tensor):
        """float32 for half types, whose sums overflow and which CPU ``dot`` lacks."""
        halves = (self.torch.float16, self.torch.bfloat16)
        return tensor.float() if tensor.dtype in halves else tensor

    # ------------------------------------------------------------------ state
    def _copy_tensor(self, tensor):
        return tensor.detach().clone()

    def _assign_tensor(self, target, saved):
        with self.torch.no_grad():
            same = (target.dtype == saved.dtype and target.shape == saved.shape
                    and target.device == saved.device)
            if same:
                target.copy_(saved)
            else:
                target.data = saved.clone()

    def rng_state(self):
        state = {"numpy": np.random.get_state(), "python": random.getstate(),
                 "torch": self.torch.get_rng_state()}
        if self.torch.cuda.is_available() and self.torch.cuda.is_initialized():
            state["torch_cuda"] = self.torch.cuda.get_rng_state_all()
        return state

    def set_rng_state(self, state):
        np.random.set_state(state["numpy"])
        random.setstate(state["python"])
        self.torch.set_rng_state(state["torch"])
        if "torch_cuda" in state:
            self.torch.cuda.set_rng_state_all(state["torch_cuda"])

    def new_optimizer(self, name, **options):
        return getattr(self.torch.optim, name)(self.model.parameters(), **options)

    def optimizer_snapshot(self, optimizer):
        return copy.deepcopy(optimizer.state_dict())

    def optimizer_restore(self, optimizer, snapshot):
        optimizer.load_state_dict(copy.deepcopy(snapshot))

    def _convert_dtype(self, model, dtype):
        model.to(dtype=getattr(self.torch, dtype.name))


class _TensorHookHandle:
    """A hook on a tensor whose ``remove()`` also drops the hook dict torch created for it."""

    def __init__(self, tensor, hook):
        self._tensor = tensor
        self._created_dict = tensor._backward_hooks is None
        self._handle = tensor.register_hook(hook)

    def remove(self):
        self._handle.remove()
        if self._created_dict and not self._tensor._backward_hooks:
            self._tensor._backward_hooks = None


@contextlib.contextmanager
def torch_threads(count=1):
    """torch's intra-op thread count set to ``count`` inside the block, restored after.

    Small models run faster on one thread: on small matrices extra threads cost more than they
    give, and on a busy machine their spin-waiting slows a step down many times over.
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
