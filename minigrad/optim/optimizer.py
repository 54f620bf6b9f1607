"""``Optimizer``: parameter groups with their own options, per-parameter state, ``state_dict``."""
import copy

import numpy as np

from ..grad_mode import enable_grad
from ..tensor import Tensor


class Optimizer:
    """Base of SGD and Adam, laid out like ``torch.optim.Optimizer``.

    ``param_groups`` is a list of dicts, each with ``"params"`` and its own options (defaults
    filled in); ``state`` maps a parameter to its dict of buffers. Subclasses define
    ``_update(param, grad, group)``, which changes ``param.data`` in place.
    """

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.state = {}
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got a Tensor")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Append a group: a dict with ``"params"`` and options that override the defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        group = dict(param_group)
        params = group.get("params")
        params = [params] if isinstance(params, Tensor) else list(params or ())
        for param in params:
            if not isinstance(param, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got "
                                f"{type(param).__name__}")
            if not param.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        taken = {id(p) for other in self.param_groups for p in other["params"]}
        if len({id(p) for p in params}) != len(params) or any(id(p) in taken for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        for name, default in self.defaults.items():
            group.setdefault(name, default)
        group["params"] = params
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Drop every parameter's gradient (``set_to_none``) or fill it with zeros."""
        for group in self.param_groups:
            for param in group["params"]:
                if set_to_none:
                    param.grad = None
                elif param.grad is not None:
                    param.grad[...] = 0

    def step(self, closure=None):
        """One update of every parameter that has a gradient; ``closure`` recomputes the loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is not None:
                    self._update(param, param.grad, group)
        return loss

    def _update(self, param, grad, group):
        raise NotImplementedError(f"{type(self).__name__} must define _update")

    def state_dict(self):
        """``{"state": {index: buffers}, "param_groups": [options, params as indices]}``, copied."""
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: copy.deepcopy(v) for k, v in group.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: copy.deepcopy(buffers) for p, buffers in self.state.items()
                 if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore options and buffers from ``state_dict()``; arrays are copied, not shared."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(saved_groups)} parameter groups, "
                             f"the optimizer has {len(self.param_groups)}")
        by_index = {}
        for own, saved in zip(self.param_groups, saved_groups):
            if len(own["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
            by_index.update(zip(saved["params"], own["params"]))
        state = {}
        for index, buffers in state_dict["state"].items():
            param = by_index[index]
            state[param] = {name: _copy_like(value, param, name) for name, value in buffers.items()}
        for own, saved in zip(self.param_groups, saved_groups):
            own.update({k: copy.deepcopy(v) for k, v in saved.items() if k != "params"})
        self.state.clear()
        self.state.update(state)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for number, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {number}")
            lines.extend(f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params")
        return "\n".join(lines + [")"])


def _copy_like(value, param, name):
    """A copy of one saved buffer, floating arrays cast to the parameter's dtype (as torch)."""
    if isinstance(value, np.ndarray) and name != "step" and np.issubdtype(value.dtype, np.floating):
        return np.array(value, dtype=param.dtype, copy=True)
    return copy.deepcopy(value)
