"""2-d convolution (cross-correlation, as in torch): im2col and one matrix product; col2im back."""
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..function import Function, ShapeError


class Conv2d(Function):
    """``conv2d(x, weight, bias, stride, padding)`` with x (N, C, H, W) and weight (O, C, kh, kw).

    ``stride`` and ``padding`` are ints or (height, width) pairs; padding adds zeros.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding):
        stride, padding = pair(stride, "stride", minimum=1), pair(padding, "padding", minimum=0)
        _check_conv_shapes(x, weight, bias, padding)
        out_channels, _, kh, kw = weight.shape
        padded = pad_spatial(x, padding, value=0)
        windows = strided_windows(padded, (kh, kw), stride)  # (N, C, OH, OW, kh, kw)
        n, channels, out_h, out_w = windows.shape[:4]
        # im2col: one row per (channel, kernel row, kernel col), one column per output position;
        # this order keeps the copy's inner loop along the image rows
        cols = windows.transpose(1, 4, 5, 0, 2, 3).reshape(channels * kh * kw, -1)
        out = (weight.reshape(out_channels, -1) @ cols).reshape(out_channels, n, out_h, out_w)
        if bias is not None:
            out += bias.reshape(-1, 1, 1, 1)
        ctx.save_for_backward(cols, weight)
        ctx.geometry = (x.shape, padded.shape, stride, padding)
        return np.ascontiguousarray(out.transpose(1, 0, 2, 3))

    @staticmethod
    def backward(ctx, grad):
        cols, weight = ctx.saved_tensors
        x_shape, padded_shape, stride, padding = ctx.geometry
        out_channels = weight.shape[0]
        grad_rows = grad.transpose(1, 0, 2, 3).reshape(out_channels, -1)  # (O, N*OH*OW)
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_cols = weight.reshape(out_channels, -1).T @ grad_rows
            grad_padded = col2im(grad_cols, padded_shape, weight.shape[2:], stride, grad.shape[2:])
            grad_x = unpad_spatial(grad_padded, padding, x_shape)
        if ctx.needs_input_grad[1]:
            grad_w = (grad_rows @ cols.T).reshape(weight.shape)
        if ctx.needs_input_grad[2]:
            grad_b = grad_rows.sum(axis=1)
        return grad_x, grad_w, grad_b, None, None


def pair(value, name, *, minimum):
    """``value`` (an int or two ints) as a (height, width) tuple of ints >= ``minimum``."""
    values = (value, value) if isinstance(value, (int, np.integer)) else tuple(value)
    if len(values) != 2 or any(int(v) != v or v < minimum for v in values):
        raise ValueError(f"{name} must be an int >= {minimum} or a pair of them, got {value!r}")
    return int(values[0]), int(values[1])


def _check_conv_shapes(x, weight, bias, padding):
    if x.ndim != 4 or weight.ndim != 4:
        raise ShapeError(f"conv2d: expected a 4-d input (N, C, H, W) and a 4-d weight "
                         f"(out, in, kh, kw), got input {x.shape} and weight {weight.shape}")
    if x.shape[1] != weight.shape[1]:
        raise ShapeError(f"conv2d: input {x.shape} has {x.shape[1]} channels but weight "
                         f"{weight.shape} expects {weight.shape[1]}")
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ShapeError(f"conv2d: bias of shape {bias.shape} does not match weight "
                         f"{weight.shape}; expected ({weight.shape[0]},)")
    for size, pad, k, axis in zip(x.shape[2:], padding, weight.shape[2:], ("height", "width")):
        if size + 2 * pad < k:
            raise ShapeError(f"conv2d: kernel {weight.shape[2:]} is larger than the padded input "
                             f"{axis} {size + 2 * pad} (input {x.shape}, padding {padding})")


def pad_spatial(x, padding, *, value):
    """``x`` (N, C, H, W) with ``padding`` = (ph, pw) rows/columns of ``value`` on each side."""
    ph, pw = padding
    if ph == 0 and pw == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def unpad_spatial(grad, padding, shape):
    """The inverse of ``pad_spatial`` for a gradient: drop the padded border."""
    ph, pw = padding
    return grad[:, :, ph:ph + shape[2], pw:pw + shape[3]]


def strided_windows(x, kernel, stride):
    """A read-only view (N, C, OH, OW, kh, kw) of every ``kernel`` window of ``x`` at ``stride``."""
    sh, sw = stride
    return sliding_window_view(x, kernel, axis=(2, 3))[:, :, ::sh, ::sw]


def col2im(grad_cols, padded_shape, kernel, stride, out_hw):
    """Add each window's gradient (columns of ``grad_cols``) back onto the (padded) input grid."""
    n, channels = padded_shape[:2]
    kh, kw = kernel
    sh, sw = stride
    out_h, out_w = out_hw
    patches = grad_cols.reshape(channels, kh, kw, n, out_h, out_w)
    grad = np.zeros(padded_shape, dtype=grad_cols.dtype)
    for i in range(kh):
        for j in range(kw):
            rows, columns = slice(i, i + sh * out_h, sh), slice(j, j + sw * out_w, sw)
            grad[:, :, rows, columns] += patches[:, i, j].transpose(1, 0, 2, 3)
    return grad
