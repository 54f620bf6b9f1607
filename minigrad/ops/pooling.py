"""2-d max pooling; the gradient goes to the first maximum of each window, as in torch."""
import numpy as np

from ..function import Function, ShapeError
from .conv import pad_spatial, pair, strided_windows, unpad_spatial


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
        kh, kw = kernel_size
        padded = pad_spatial(x, padding, value=-np.inf)
        windows = strided_windows(padded, kernel_size, stride)  # (N, C, OH, OW, kh, kw)
        # one slab per window position, so that max and the comparisons run on whole arrays
        candidates = windows.transpose(4, 5, 0, 1, 2, 3).reshape((kh * kw,) + windows.shape[:4])
        out = candidates.max(axis=0)
        ctx.argmax = first_index_of(candidates, out)
        ctx.geometry = (x.shape, padded.shape, kernel_size, stride, padding)
        return out

    @staticmethod
    def backward(ctx, grad):
        x_shape, padded_shape, (kh, kw), (sh, sw), padding = ctx.geometry
        out_h, out_w = grad.shape[2:]
        grad_padded = np.zeros(padded_shape, dtype=grad.dtype)
        for i in range(kh):
            for j in range(kw):
                routed = np.where(ctx.argmax == i * kw + j, grad, 0)
                grad_padded[:, :, i:i + sh * out_h:sh, j:j + sw * out_w:sw] += routed
        return unpad_spatial(grad_padded, padding, x_shape), None, None, None


def first_index_of(candidates, best):
    """For each position, the first ``k`` with ``candidates[k] == best``: torch's pick among ties."""
    index = np.zeros(best.shape, dtype=np.int32)
    found = candidates[0] == best
    for k in range(1, len(candidates)):
        hit = candidates[k] == best
        index += k * (hit & ~found)
        found |= hit
    return index


def _check_pool_shapes(x, kernel_size, padding):
    if x.ndim != 4:
        raise ShapeError(f"max_pool2d: expected a 4-d input (N, C, H, W), got shape {x.shape}")
    if any(2 * pad > k for pad, k in zip(padding, kernel_size)):
        raise ValueError(f"max_pool2d: padding {padding} must be at most half of kernel_size "
                         f"{kernel_size}")
    if any(size + 2 * pad < k for size, pad, k in zip(x.shape[2:], padding, kernel_size)):
        raise ShapeError(f"max_pool2d: kernel_size {kernel_size} is larger than the padded "
                         f"input {x.shape} (padding {padding})")
