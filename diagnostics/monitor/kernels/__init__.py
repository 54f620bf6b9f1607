"""The Monitor's statistics kernels, one file per framework: device reductions of activations,
gradients, weight samples and predictions, the one transfer that brings them to the host, and
the walk that sees whether a loss still holds its graph. Only the Monitor uses them, so they
live here rather than in the backend protocol that every diagnostic shares."""
from .base import Kernels
from .minigrad_kernels import MinigradKernels
from .torch_kernels import TorchKernels

_KERNELS = {"minigrad": MinigradKernels, "torch": TorchKernels}


def kernels_for(backend):
    """The kernels of ``backend``'s framework."""
    return _KERNELS[backend.name](backend)


__all__ = ["Kernels", "MinigradKernels", "TorchKernels", "kernels_for"]
