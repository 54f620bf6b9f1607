"""2-d convolution (cross-correlation, as in torch): im2col, a matrix product per image, col2im.

The columns are built a block of images at a time, small enough to stay in cache, and built
again in backward rather than kept: they are kh*kw times the size of the input.
"""
import numpy as np

from ..function import Function, ShapeError

BLOCK_BYTES = 1 << 19  # the columns of one block of images


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
        out_h, out_w = output_size(padded.shape[2:], (kh, kw), stride)
        rows = weight.reshape(out_channels, -1)
        # one matrix product per image: the result is already in (N, O, OH*OW) order
        out = np.empty((x.shape[0], out_channels, out_h * out_w), dtype=np.result_type(x, weight))
        for block in _split_batch(padded, (kh, kw), stride):
            np.matmul(rows, im2col(padded[block], (kh, kw), stride), out=out[block])
        if bias is not None:
            out += bias.reshape(-1, 1)
        ctx.save_for_backward(padded, weight)
        ctx.geometry = (x.shape, padded.shape, stride, padding)
        return out.reshape(x.shape[0], out_channels, out_h, out_w)

    @staticmethod
    def backward(ctx, grad):
        padded, weight = ctx.saved_tensors
        x_shape, padded_shape, stride, padding = ctx.geometry
        out_channels, channels, kh, kw = weight.shape
        rows = weight.reshape(out_channels, -1)
        grad_rows = grad.reshape(grad.shape[0], out_channels, -1)  # (N, O, OH*OW)
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        grad_padded = np.zeros(padded_shape, dtype=grad.dtype) if need_x else None
        grad_w = np.zeros(rows.shape, dtype=np.result_type(grad, padded)) if need_w else None
        for block in _split_batch(padded, (kh, kw), stride) if need_x or need_w else ():
            if need_w:
                # per image (O, OH*OW) @ (OH*OW, C*kh*kw), summed over the block
                cols = im2col(padded[block], (kh, kw), stride)
                grad_w += np.matmul(grad_rows[block], cols.transpose(0, 2, 1)).sum(axis=0)
            if need_x:
                grad_cols = np.matmul(rows.T, grad_rows[block])
                patches = grad_cols.reshape((-1, channels, kh * kw) + grad.shape[2:])
                _add_patches(grad_padded[block], patches, (kh, kw), stride)
        grad_x = unpad_spatial(grad_padded, padding, x_shape) if need_x else None
        grad_w = grad_w.reshape(weight.shape) if need_w else None
        grad_b = grad_rows.sum(axis=(0, 2)) if need_b else None
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
    n, channels, height, width = x.shape
    padded = np.full((n, channels, height + 2 * ph, width + 2 * pw), value, dtype=x.dtype)
    padded[:, :, ph:ph + height, pw:pw + width] = x
    return padded


def unpad_spatial(grad, padding, shape):
    """The inverse of ``pad_spatial`` for a gradient: drop the padded border."""
    ph, pw = padding
    return grad[:, :, ph:ph + shape[2], pw:pw + shape[3]]


def kernel_slabs(x, kernel, stride, out_hw):
    """Views (N, C, OH, OW) of ``x``, one per kernel offset (i, j) in row-major order: slab
    ``i * kw + j`` holds, for every window, its element at row i and column j."""
    kh, kw = kernel
    sh, sw = stride
    out_h, out_w = out_hw
    return [x[:, :, i:i + sh * out_h:sh, j:j + sw * out_w:sw]
            for i in range(kh) for j in range(kw)]


def im2col(padded, kernel, stride):
    """Every ``kernel`` window of ``padded`` (N, C, H, W) at ``stride``, as (N, C*kh*kw, OH*OW).

    One slice copy per kernel offset, each running along the image rows.
    """
    n, channels = padded.shape[:2]
    out_hw = output_size(padded.shape[2:], kernel, stride)
    cols = np.empty((n, channels, kernel[0] * kernel[1]) + out_hw, dtype=padded.dtype)
    for k, slab in enumerate(kernel_slabs(padded, kernel, stride, out_hw)):
        cols[:, :, k] = slab
    return cols.reshape(n, -1, out_hw[0] * out_hw[1])


def col2im(grad_cols, padded_shape, kernel, stride, out_hw):
    """Add each window's gradient back onto the (padded) input grid, from the columns
    (C*kh*kw, N*OH*OW) of a single matrix product over the whole batch."""
    n, channels = padded_shape[:2]
    out_h, out_w = out_hw
    patches = grad_cols.reshape(channels, kernel[0] * kernel[1], n, out_h, out_w)
    grad = np.zeros(padded_shape, dtype=grad_cols.dtype)
    _add_patches(grad, patches.transpose(2, 0, 1, 3, 4), kernel, stride)
    return grad


def _add_patches(grad, patches, kernel, stride):
    """Add ``patches`` (N, C, kh*kw, OH, OW), one slab per kernel offset, into ``grad``."""
    for k, slab in enumerate(kernel_slabs(grad, kernel, stride, patches.shape[3:])):
        slab += patches[:, :, k]


def _split_batch(padded, kernel, stride):
    """Slices of the batch of even size whose columns take at most ``BLOCK_BYTES`` each (or
    one image, if that is bigger)."""
    n, channels = padded.shape[:2]
    out_h, out_w = output_size(padded.shape[2:], kernel, stride)
    image_bytes = channels * kernel[0] * kernel[1] * out_h * out_w * padded.itemsize
    count = max(1, -(-n * image_bytes // BLOCK_BYTES))
    size = max(1, -(-n // count))
    return [slice(start, start + size) for start in range(0, n, size)]


def output_size(padded_hw, kernel, stride):
    """(OH, OW): how many windows fit along each axis of the padded input."""
    return tuple((size - k) // s + 1 for size, k, s in zip(padded_hw, kernel, stride))
