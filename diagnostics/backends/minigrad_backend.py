"""The backend for ``minigrad.nn.Module`` models."""
import copy
import random

import numpy as np

import minigrad
from minigrad.tensor import Tensor

from .base import Backend


class MinigradBackend(Backend):
    name = "minigrad"
    HOOK_SIDE_DICTS = ("_forward_pre_hooks_with_kwargs",)

    @staticmethod
    def accepts(model):
        return isinstance(model, minigrad.nn.Module)

    def is_tensor(self, value):
        return isinstance(value, Tensor)

    # ----------------------------------------------------------------- arrays
    def to_numpy(self, tensor):
        data = tensor.data if isinstance(tensor, Tensor) else tensor
        return np.array(data, copy=True)

    def from_numpy(self, array, *, like=None):
        return Tensor(np.asarray(array))

    def write_parameter(self, name, array):
        param = self.parameter(name)
        param.data[...] = array

    # ---------------------------------------------------------------- running
    def plain_chain(self, module):
        return type(module) is minigrad.nn.Sequential and "forward" not in vars(module)

    def no_grad(self):
        return minigrad.no_grad()

    def enable_grad(self):
        return minigrad.enable_grad()

    def grad_enabled(self):
        return minigrad.is_grad_enabled()

    def node_inputs(self, node):
        return [getattr(x, "grad_fn", None) for x in node.inputs]

    def scalar(self, tensor):
        data = tensor.data if isinstance(tensor, Tensor) else tensor
        return float(np.asarray(data).reshape(-1)[0])

    # ------------------------------------------------------------------ state
    def _copy_tensor(self, tensor):
        data = tensor.data if isinstance(tensor, Tensor) else tensor
        return np.array(data, copy=True)

    def _assign_tensor(self, target, saved):
        if target.data.dtype == saved.dtype and target.data.shape == saved.shape:
            target.data[...] = saved
        else:
            target.data = saved.copy()

    def rng_state(self):
        return {"numpy": np.random.get_state(), "python": random.getstate(),
                "minigrad": copy.deepcopy(minigrad.get_rng_state())}

    def set_rng_state(self, state):
        np.random.set_state(state["numpy"])
        random.setstate(state["python"])
        minigrad.set_rng_state(copy.deepcopy(state["minigrad"]))

    def new_optimizer(self, name, **options):
        return getattr(minigrad.optim, name)(self.model.parameters(), **options)

    def optimizer_snapshot(self, optimizer):
        return copy.deepcopy(optimizer.state_dict())

    def optimizer_restore(self, optimizer, snapshot):
        optimizer.load_state_dict(copy.deepcopy(snapshot))

    def _convert_dtype(self, model, dtype):
        model.to(dtype)
