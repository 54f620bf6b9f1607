"""Embedding lookup: rows of a weight table picked by integer indices."""
import numpy as np

from ..function import Function


class Embedding(Function):
    """``weight[indices]``; backward adds each output row's gradient into its row of the table.

    A token that appears several times collects the sum of its gradients (``np.add.at``, which
    accumulates over repeated indices where ``grad_table[indices] = grad`` would keep only one).
    """

    @staticmethod
    def forward(ctx, indices, weight):
        if indices.dtype.kind not in "iu":
            raise TypeError(f"embedding: indices must be integers, got dtype {indices.dtype}")
        if indices.size and (indices.min() < -weight.shape[0] or indices.max() >= weight.shape[0]):
            raise IndexError(f"embedding: indices must lie in [0, {weight.shape[0]}), got values "
                             f"from {indices.min()} to {indices.max()}")
        ctx.save_for_backward(indices)
        ctx.table_shape = weight.shape
        return weight[indices]

    @staticmethod
    def backward(ctx, grad):
        (indices,) = ctx.saved_tensors
        grad_weight = np.zeros(ctx.table_shape, dtype=grad.dtype)
        np.add.at(grad_weight, indices.reshape(-1), grad.reshape(-1, ctx.table_shape[1]))
        return None, grad_weight
