"""``Module``: the base of every layer.

It uses torch's names for parameters, modules, hooks and state.
"""
import itertools
from collections import OrderedDict

import numpy as np

from ..tensor import RemovableHandle, Tensor
from .hooks import BackwardHookCall
from .parameter import Parameter

_hook_ids = itertools.count()


class Module:
    """Base class of layers and models, mirroring ``torch.nn.Module``.

    Attributes that are Parameters or Modules are registered in assignment order, so
    ``named_parameters()`` yields torch's names (``"0.weight"``, ``"block.fc1.bias"``).
    """

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks_with_kwargs", {})
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_backward_hooks", OrderedDict())

    # ------------------------------------------------------------- registration
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("call Module.__init__() before assigning attributes")
        if isinstance(value, Parameter) or (value is None and name in self._parameters):
            target = self._parameters
        elif isinstance(value, Module):
            target = self._modules
        elif name in self._buffers and (value is None or isinstance(value, Tensor)):
            target = self._buffers  # torch keeps a reassigned buffer a buffer
        else:
            target = None
        for registry in (self._parameters, self._buffers, self._modules):
            if registry is not target:
                registry.pop(name, None)
        if target is None:
            object.__setattr__(self, name, value)
            return
        target[name] = value  # an existing key keeps its place, as in torch
        self.__dict__.pop(name, None)

    def __getattr__(self, name):
        for registry in ("_parameters", "_buffers", "_modules"):
            values = self.__dict__.get(registry)
            if values is not None and name in values:
                return values[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for registry in (self._parameters, self._buffers, self._modules):
            if name in registry:
                del registry[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        self._parameters[name] = param

    def register_buffer(self, name, value):
        """A non-learnable tensor that belongs to the state (running statistics, say)."""
        self._buffers[name] = None if value is None else (
            value if isinstance(value, Tensor) else Tensor(np.asarray(value)))

    def add_module(self, name, module):
        self._modules[name] = module

    # --------------------------------------------------------------- traversal
    def named_modules(self, prefix=""):
        """``(name, module)`` for this module and every descendant, depth first, each once."""
        seen, stack = set(), [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            children = [(f"{name}.{child_name}" if name else child_name, child)
                        for child_name, child in module._modules.items() if child is not None]
            stack.extend(reversed(children))

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        yield from ((n, m) for n, m in self._modules.items() if m is not None)

    def children(self):
        for _, module in self.named_children():
            yield module

    def named_parameters(self, prefix="", recurse=True):
        yield from self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix="", recurse=True):
        yield from self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def _named_members(self, registry, prefix, recurse):
        seen = set()
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for module_name, module in modules:
            for name, value in getattr(module, registry).items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{module_name}.{name}" if module_name else name), value

    # ------------------------------------------------------------ modes, state
    def train(self, mode=True):
        for module in self.modules():
            object.__setattr__(module, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for param in self.parameters():
            param.requires_grad = bool(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for param in self.parameters():
            if set_to_none:
                param.grad = None
            elif param.grad is not None:
                param.grad[...] = 0

    def apply(self, fn):
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def to(self, dtype):
        """Convert parameters and floating buffers to ``dtype`` in place, as torch does."""
        for param in self.parameters():
            param.data = param.data.astype(dtype)
            if param.grad is not None:
                param.grad = param.grad.astype(dtype)
        for buffer in self.buffers():
            if np.issubdtype(buffer.dtype, np.floating):
                buffer.data = buffer.data.astype(dtype)
        return self

    def double(self):
        return self.to(np.float64)

    def float(self):
        return self.to(np.float32)

    def state_dict(self):
        """Parameters and buffers by name, as detached tensors sharing the module's data.

        Ordered as torch orders them: module by module, each module's parameters then buffers.
        A tensor shared by two modules (tied weights) is listed under both names, as in torch.
        """
        return OrderedDict((name, Tensor(value.data)) for name, value in self._state_entries())

    def load_state_dict(self, state_dict, strict=True):
        """Copy values in (minigrad or torch tensors, or ndarrays); shapes must match."""
        own = dict(self._state_entries())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        for name, value in state_dict.items():
            if name not in own:
                continue
            array = _to_numpy(value)
            target = own[name]
            if array.shape != target.shape:
                raise ValueError(f"load_state_dict: '{name}' has shape {array.shape} in the "
                                 f"state dict but {target.shape} in the module")
            target.data[...] = array
        return missing, unexpected

    def _state_entries(self):
        """(name, tensor) of every parameter and buffer, shared ones under each of their names."""
        for module_name, module in self.named_modules():
            prefix = f"{module_name}." if module_name else ""
            for name, value in itertools.chain(module._parameters.items(), module._buffers.items()):
                if value is not None:
                    yield prefix + name, value

    # -------------------------------------------------------------------- hooks
    def register_forward_pre_hook(self, hook, *, with_kwargs=False):
        """``hook(module, args)`` before forward; may return replacement args. With
        ``with_kwargs``, ``hook(module, args, kwargs)``, which may return ``(args, kwargs)``."""
        handle = self._add_hook(self._forward_pre_hooks, hook,
                                self._forward_pre_hooks_with_kwargs)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.key] = True
        return handle

    def register_forward_hook(self, hook):
        """``hook(module, args, output)`` after forward; may return a replacement output."""
        return self._add_hook(self._forward_hooks, hook)

    def register_full_backward_hook(self, hook):
        """``hook(module, grad_input, grad_output)`` with ndarrays (or None), as in torch."""
        return self._add_hook(self._backward_hooks, hook)

    @staticmethod
    def _add_hook(hooks, hook, *side_dicts):
        key = next(_hook_ids)
        hooks[key] = hook
        return RemovableHandle(hooks, key, *side_dicts)

    # ------------------------------------------------------------------ calling
    def forward(self, *args):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        for key, hook in list(self._forward_pre_hooks.items()):
            if key in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    args, kwargs = result
                continue
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        call = BackwardHookCall(self, self._backward_hooks) if self._backward_hooks else None
        if call is not None:
            args = call.wrap_inputs(args)
        output = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
        if call is not None:
            output = call.wrap_outputs(output)
        return output

    # ------------------------------------------------------------------ display
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"({name}): " + repr(module).replace("\n", "\n  ")
                 for name, module in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def _to_numpy(value):
    if isinstance(value, Tensor):
        return value.data
    if hasattr(value, "detach"):  # a torch tensor
        return value.detach().cpu().numpy()
    return np.asarray(value)
