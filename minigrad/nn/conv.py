"""``Conv2d``: weight (out_channels, in_channels, kh, kw), bias (out_channels,), as in torch."""
import math

import numpy as np

from .. import functional as F
from ..ops.conv import pair
from . import init
from .module import Module
from .parameter import Parameter


class Conv2d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, *,
                 bias=True, dtype=np.float32):
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = pair(kernel_size, "kernel_size", minimum=1)
        self.stride = pair(stride, "stride", minimum=1)
        self.padding = pair(padding, "padding", minimum=0)
        shape = (out_channels, in_channels) + self.kernel_size
        self.weight = Parameter(np.empty(shape, dtype=dtype))
        self.bias = Parameter(np.empty(out_channels, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        """torch's default: Kaiming-uniform weight (a=sqrt(5)), bias uniform in ±1/sqrt(fan_in)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_channels * self.kernel_size[0] * self.kernel_size[1]
            bound = 1 / math.sqrt(fan_in) if fan_in else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, stride=self.stride, padding=self.padding)

    def extra_repr(self):
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0, 0):
            text += f", padding={self.padding}"
        return text if self.bias is not None else text + ", bias=False"
