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
    def no_grad(self):
        return minigrad.no_grad()

    def enable_grad(self):
        return minigrad.enable_grad()

    def grad_enabled(self):
        return minigrad.is_grad_enabled()

    def scalar(self, tensor):
        data = tensor.data if isinstance(tensor, Tensor) else tensor
        return float(np.asarray(data).reshape(-1)[0])

    # ------------------------------------------------------------- statistics
    def activation_statistics(self, tensor, *, saturation=None):
        with np.errstate(over="ignore", invalid="ignore"):   # inf/NaN are what we report
            return self._activation_statistics(tensor, saturation)

    def _activation_statistics(self, tensor, saturation):
        x = tensor.data if isinstance(tensor, Tensor) else np.asarray(tensor)
        if x.size == 0 or not np.issubdtype(x.dtype, np.floating):
            return None
        flat = x.reshape(-1)
        if x.ndim < 2:
            unit_max, unit_min = flat.max(keepdims=True), flat.min(keepdims=True)
        else:
            axes = (0,) + tuple(range(2, x.ndim))
            unit_max, unit_min = x.max(axis=axes), x.min(axis=axes)
        stats = (flat.sum(), np.dot(flat, flat), np.float64(np.count_nonzero(flat)), unit_max,
                 unit_min)
        if saturation is None:
            return stats
        center, radius = saturation
        return stats + (np.float64(np.count_nonzero(np.abs(flat - center) > radius)),)

    def prediction_entropy(self, tensor):
        x = tensor.data if isinstance(tensor, Tensor) else np.asarray(tensor)
        if x.size == 0 or x.ndim == 0 or x.shape[-1] < 2 or not np.issubdtype(x.dtype,
                                                                               np.floating):
            return None
        x = x.astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            shifted = x - x.max(axis=-1, keepdims=True)
            log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
            return np.float64(-(np.exp(log_p) * log_p).sum(axis=-1).mean())

    def gradient_statistics(self, grad, *, per_unit=False):
        flat = np.asarray(getattr(grad, "data", grad)).reshape(-1)
        if flat.size == 0:
            return (np.float64(0),) * 3
        magnitude = np.abs(flat)
        rows = np.shape(getattr(grad, "data", grad))
        with np.errstate(over="ignore", invalid="ignore"):
            largest = (magnitude.reshape(rows[0], -1).max(axis=1) if per_unit and rows
                       else magnitude.max())
            return (np.dot(flat, flat), magnitude.sum(), largest)

    def weight_sample(self, param, *, into=None):
        entries = self._sampled(param)
        if into is not None and into.shape == entries.shape and into.dtype == entries.dtype:
            into[...] = entries
            return into
        return entries.copy()

    def update_statistics(self, param, before):
        now = self._sampled(param)
        with np.errstate(over="ignore", invalid="ignore"):
            return (np.linalg.norm(before - now), np.linalg.norm(now))

    def _sampled(self, param):
        flat = param.data.reshape(-1)
        plan = self._sample_stride(flat.size)
        if plan is None:
            return flat
        blocks, stride = plan
        return flat[:blocks * self.SAMPLE_BLOCK].reshape(blocks, self.SAMPLE_BLOCK)[::stride]

    def _saved_state(self, node):
        if node.released:
            return False
        return True if node.saved_tensors else None

    def _node_inputs(self, node):
        return [getattr(x, "grad_fn", None) for x in node.inputs]

    def gather(self, results):
        arrays = [np.asarray(r.data if isinstance(r, Tensor) else r, dtype=np.float64)
                  for r in results]
        return [float(a) if a.ndim == 0 else a.reshape(-1) for a in arrays]

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
