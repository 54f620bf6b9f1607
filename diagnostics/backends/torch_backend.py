"""The backend for ``torch.nn.Module`` models. torch is imported only when such a model arrives."""
import contextlib
import copy
import functools
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
        super().__init__(model)

    @staticmethod
    def accepts(model):
        torch = sys.modules.get("torch")
        return torch is not None and isinstance(model, torch.nn.Module)

    def is_tensor(self, value):
        return isinstance(value, self.torch.Tensor)

    def plain_chain(self, module):
        hooks = self.torch.nn.modules.module
        return (type(module) is self.torch.nn.Sequential and "forward" not in vars(module)
                and not hooks._global_forward_hooks and not hooks._global_forward_pre_hooks)

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

    def node_inputs(self, node):
        return [child for child, _ in node.next_functions]

    def use_recorder(self, on_use):
        return _use_recorder_class(self.torch)(on_use)

    def sole_consumers(self, loss):
        edges, stack, seen = {}, [getattr(loss, "grad_fn", None)], set()
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            for child, number in node.next_functions:
                if child is not None:
                    edges.setdefault((id(child), number), []).append(node)
                    stack.append(child)
        return {child: consumers[0] for (child, number), consumers in edges.items()
                if number == 0 and len(consumers) == 1}

    def scalar(self, tensor):
        if not self.is_tensor(tensor):
            return float(tensor)
        if tensor.numel() == 1:
            return float(tensor.item())     # 5x faster than indexing, in a training loop
        return float(tensor.detach().reshape(-1)[0])

    # ------------------------------------------------------------------ hooks
    def add_tensor_hook(self, tensor, hook):
        return _TensorHookHandle(tensor, hook)

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

    def _is_generator(self, value):
        return isinstance(value, self.torch.Generator) or super()._is_generator(value)

    def _generator_state(self, generator):
        if isinstance(generator, self.torch.Generator):
            return generator.get_state()
        return super()._generator_state(generator)

    def _generators_watched(self, keep):
        return _generator_watch_class(self.torch)(keep)

    def new_optimizer(self, name, **options):
        return getattr(self.torch.optim, name)(self.model.parameters(), **options)

    def optimizer_snapshot(self, optimizer):
        return copy.deepcopy(optimizer.state_dict())

    def optimizer_restore(self, optimizer, snapshot):
        optimizer.load_state_dict(copy.deepcopy(snapshot))

    def _convert_dtype(self, model, dtype):
        model.to(dtype=getattr(self.torch, dtype.name))

    def float64_casts(self):
        return _float64_casts(self.torch)


_HOOK_DICTS_MADE = {}   # id(tensor) -> the hook dict a _TensorHookHandle made torch create


class _TensorHookHandle:
    """A hook on a tensor whose ``remove()`` also drops the hook dict torch created for it,
    also when several handles overlap (the last one removed drops it)."""

    def __init__(self, tensor, hook):
        self._tensor = tensor
        created = tensor._backward_hooks is None
        self._handle = tensor.register_hook(hook)
        if created:
            _HOOK_DICTS_MADE[id(tensor)] = tensor._backward_hooks

    def remove(self):
        self._handle.remove()
        tensor = self._tensor
        made = _HOOK_DICTS_MADE.get(id(tensor))
        if made is not None and tensor._backward_hooks is made and not made:
            tensor._backward_hooks = None
            del _HOOK_DICTS_MADE[id(tensor)]


@contextlib.contextmanager
def _float64_casts(torch):
    """float64 for every floating dtype user code asks for (``.float()``, ``.half()``,
    ``dtype=torch.float32``, ``.to(torch.float32)``) and as the default dtype, restored after;
    and float64 for a lower-precision constant (no parameter, no gradient) where it meets a
    float64 tensor in one call.

    Why: ``F.binary_cross_entropy_with_logits(logits, y.float())`` on float64 logits computes
    in float32 (its target's dtype), and finite differences at float32 precision are noise:
    without this a healthy loss fails the float64 check. A float32 mask that the forward
    builds from NumPy or keeps as a plain attribute follows no default dtype, and torch's CPU
    attention misreads a float32 ``attn_mask`` next to float64 queries: the copy would then be
    another model than the user's (a leak from the future its mask prevents). Parameters and
    tensors that carry a gradient are left as they are: a float32 weight outside the model is
    a real bug, named by the dtype clash it raises.
    """
    from torch.overrides import TorchFunctionMode

    lower = (torch.float32, torch.float16, torch.bfloat16)
    narrowing = (torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16)

    def widen(value):
        return torch.float64 if isinstance(value, torch.dtype) and value in lower else value

    def tensors(values):
        for value in values:
            if isinstance(value, (tuple, list)):
                yield from (v for v in value if isinstance(v, torch.Tensor))
            elif isinstance(value, torch.Tensor):
                yield value

    def constant(value):
        return (isinstance(value, torch.Tensor) and value.dtype in lower
                and not value.requires_grad and not isinstance(value, torch.nn.Parameter))

    def widen_constant(value):
        if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
            return type(value)(widen_constant(v) for v in value)
        return value.double() if constant(value) else value

    class Float64Casts(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = {key: widen(value) for key, value in (kwargs or {}).items()}
            if func in narrowing:
                return torch.Tensor.double(*args, **kwargs)
            args = tuple(widen(value) for value in args)
            mixed = any(t.dtype == torch.float64 for t in tensors((*args, *kwargs.values())))
            if mixed:
                first = 1 if args and _writes_first(func) else 0   # an in-place target stays
                args = args[:first] + tuple(widen_constant(v) for v in args[first:])
                kwargs = {key: value if key == "out" else widen_constant(value)
                          for key, value in kwargs.items()}
            return func(*args, **kwargs)

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float64Casts():
            yield
    finally:
        torch.set_default_dtype(previous)


def _writes_first(func):
    """Whether ``func`` writes into its first argument (``add_``, ``__iadd__``,
    ``__setitem__``): a widened copy there would take the write away from the user's tensor."""
    name = getattr(func, "__name__", "")
    return (name.endswith("_") and not name.endswith("__")) or name == "__setitem__" or (
        name.startswith("__i") and name.endswith("__"))


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


@functools.cache
def _use_recorder_class(torch):
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_leaves

    tensor = torch.Tensor
    metadata = (tensor.size, tensor.dim, tensor.numel)   # compared with ==, no hashing
    descriptors = {"shape", "dtype", "device", "ndim", "requires_grad", "is_leaf", "grad_fn",
                   "layout", "is_cuda"}

    class UseRecorder(TorchFunctionMode):
        """Hands the tensors of every torch function call to ``on_use``; a metadata read
        (shape, dtype, device, ...) is no use of the values and is left out."""

        def __init__(self, on_use):
            super().__init__()
            self.on_use = on_use

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            descriptor = getattr(getattr(func, "__self__", None), "__name__", None)
            if func not in metadata and not (
                    descriptor in descriptors and type(func).__name__ == "method-wrapper"):
                self.on_use([leaf for leaf in tree_leaves((args, kwargs))
                             if isinstance(leaf, tensor)])
            return func(*args, **kwargs)

    return UseRecorder


@functools.cache
def _generator_watch_class(torch):
    from torch.overrides import TorchFunctionMode

    generator = torch.Generator

    class GeneratorWatch(TorchFunctionMode):
        """Hands each generator given to a torch function (``generator=``, or positionally as
        ``torch.poisson`` and ``nn.init`` take it) to ``keep`` before the function draws."""

        def __init__(self, keep):
            super().__init__()
            self.keep = keep

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if isinstance(kwargs.get("generator"), generator):
                self.keep(kwargs["generator"])
            for value in args:
                if isinstance(value, generator):
                    self.keep(value)
            return func(*args, **kwargs)

    return GeneratorWatch
