"""Normalization layers: ``BatchNorm1d``, ``BatchNorm2d`` and ``LayerNorm``, with torch's state."""
import numpy as np

from .. import functional as F
from ..function import ShapeError
from ..tensor import Tensor
from . import init
from .module import Module
from .parameter import Parameter


class _BatchNorm(Module):
    """Per-channel normalization with buffers running_mean, running_var, num_batches_tracked.

    ``momentum=None`` gives a cumulative moving average, as in torch.
    """

    expected_dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, *, dtype=np.float32):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(np.empty(num_features, dtype=dtype))
            self.bias = Parameter(np.empty(num_features, dtype=dtype))
        else:
            self.weight = self.bias = None
        if track_running_stats:
            self.register_buffer("running_mean", Tensor(np.zeros(num_features, dtype=dtype)))
            self.register_buffer("running_var", Tensor(np.ones(num_features, dtype=dtype)))
            self.register_buffer("num_batches_tracked", Tensor(np.array(0, dtype=np.int64)))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.data[...] = 0
            self.running_var.data[...] = 1
            self.num_batches_tracked.data[...] = 0

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, x):
        if x.ndim not in self.expected_dims:
            wanted = " or ".join(f"{d}D" for d in self.expected_dims)
            raise ShapeError(f"{type(self).__name__}: expected {wanted} input (got {x.ndim}D "
                             f"input of shape {x.shape})")
        momentum = self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.data[...] += 1
            if momentum is None:
                momentum = 1.0 / float(self.num_batches_tracked.item())
        use_running = not self.training and self.track_running_stats
        return F.batch_norm(
            x, self.running_mean if self.track_running_stats else None,
            self.running_var if self.track_running_stats else None, self.weight, self.bias,
            training=not use_running, momentum=0.0 if momentum is None else momentum,
            eps=self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L) inputs."""

    expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W) inputs."""

    expected_dims = (4,)


class LayerNorm(Module):
    """Normalize over the trailing ``normalized_shape`` axes; ``weight`` ones, ``bias`` zeros."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, *, bias=True,
                 dtype=np.float32):
        super().__init__()
        if isinstance(normalized_shape, (int, np.integer)):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(n) for n in normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = self.bias = None
        if elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dtype))

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
