"""``Linear``: ``y = x @ weight.T + bias``, weight of shape (out_features, in_features)."""
import math

import numpy as np

from .. import functional as F
from . import init
from .module import Module
from .parameter import Parameter


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, dtype=np.float32):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(np.empty((out_features, in_features), dtype=dtype))
        self.bias = Parameter(np.empty(out_features, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        """torch's default: Kaiming-uniform weight with a=sqrt(5), uniform bias in
        ±1/sqrt(fan_in)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")
