"""Backends: one per framework, chosen from the model's type. A user never names one."""
import importlib.util

import numpy as np

from ..errors import DiagnosticsError
from .base import Backend, ModelState
from .minigrad_backend import MinigradBackend
from .torch_backend import TorchBackend, torch_threads

_BACKENDS = (MinigradBackend, TorchBackend)


def get_backend(model, *, argument="model"):
    """The backend for ``model``; a ``DiagnosticsError`` naming ``argument`` if there is none."""
    for backend in _BACKENDS:
        if backend.accepts(model):
            return backend(model)
    raise DiagnosticsError(
        f"{argument}: expected a torch.nn.Module or a minigrad.nn.Module, "
        f"got {type(model).__module__}.{type(model).__qualname__}")


def numpy_of(value):
    """The NumPy array a NumPy array, a torch tensor or a minigrad Tensor holds, without
    importing torch (so data checks take either framework's tensors); None for anything else."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        return value.detach().cpu().numpy()
    if hasattr(value, "data") and isinstance(getattr(value, "data"), np.ndarray):
        return value.data  # a minigrad Tensor
    return None


def torch_installed():
    """True when torch can be imported (without importing it)."""
    return importlib.util.find_spec("torch") is not None


TORCH_MISSING = "torch is not installed (pip install 'gradhunt[torch]')"

__all__ = ["Backend", "ModelState", "MinigradBackend", "TorchBackend", "get_backend",
           "numpy_of", "torch_installed", "torch_threads", "TORCH_MISSING"]
