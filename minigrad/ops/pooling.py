"""2-d max pooling; the gradient goes to the first maximum of each window, as in torch."""
import numpy as np

from ..function import Function, ShapeError
from .conv import kernel_slabs, output_size, pad_spatial, pair, unpad_spatial


class MaxPool2d(Function):
    """``max_pool2d(x, kernel_size, stride, padding)`` over the last two axes of x (N, C, H, W).

    ``stride`` None means ``kernel_size``; padding adds -inf, at most half the kernel.
    """

    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding):
        kernel_size = pair(kernel_size, "kernel_size", minimum=1)
        stride = kernel_size if stride is None else pair(stride, "stride", minimum=1)
        padding = pair(padding, "padding", minimum=0)
        _check_pool_shapes(x, kernel_size, padding)
        padded = pad_spatial(x, padding, value=-np.inf)
        out_hw = output_size(padded.shape[2:], kernel_size, stride)
        # one strided view per window position, so that max and the comparisons run on whole arrays
        slabs = kernel_slabs(padded, kernel_size, stride, out_hw)
        out = slabs[0].copy()
        for slab in slabs[1:]:
            np.maximum(out, slab, out=out)
        ctx.save_for_backward(first_max_masks(slabs, out))
        ctx.geometry = (x.shape, padded.shape, kernel_size, stride, padding)
        return out

    @staticmethod
    def backward(ctx, grad):
        (masks,) = ctx.saved_tensors
        x_shape, padded_shape, kernel_size, stride, padding = ctx.geometry
        grad_padded = np.zeros(padded_shape, dtype=grad.dtype)
        overlapping = stride[0] < kernel_size[0] or stride[1] < kernel_size[1]
        slabs = kernel_slabs(grad_padded, kernel_size, stride, grad.shape[2:])
        for mask, slab in zip(masks, slabs):
            if overlapping:
                slab += grad * mask
            else:  # each input element lies in one window at most: write in place
                np.multiply(grad, mask, out=slab)
        return unpad_spatial(grad_padded, padding, x_shape), None, None, None


def first_max_masks(slabs, best):
    """One boolean mask per slab, true where it holds its window's first maximum ``best``
    (torch's pick among ties)."""
    masks = np.empty((len(slabs),) + best.shape, dtype=bool)
    found = np.zeros(best.shape, dtype=bool)
    for slab, mask in zip(slabs, masks):
        np.equal(slab, best, out=mask)
        mask &= ~found
        found |= mask
    return masks


def _check_pool_shapes(x, kernel_size, padding):
    if x.ndim != 4:
        raise ShapeError(f"max_pool2d: expected a 4-d input (N, C, H, W), got shape {x.shape}")
    if any(2 * pad > k for pad, k in zip(padding, kernel_size)):
        raise ValueError(f"max_pool2d: padding {padding} must be at most half of kernel_size "
                         f"{kernel_size}")
    if any(size + 2 * pad < k for size, pad, k in zip(x.shape[2:], padding, kernel_size)):
        raise ShapeError(f"max_pool2d: kernel_size {kernel_size} is larger than the padded "
                         f"input {x.shape} (padding {padding})")
