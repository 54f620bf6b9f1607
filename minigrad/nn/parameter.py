"""``Parameter``: a leaf tensor that a Module registers as learnable."""
import numpy as np

from ..tensor import Tensor


class Parameter(Tensor):
    def __init__(self, data, requires_grad=True):
        if isinstance(data, Tensor):
            data = data.data
        super().__init__(np.asarray(data), requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()
