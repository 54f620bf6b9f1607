"""2-d convolution (cross-correlation, as in torch): im2col, a matrix product per image, col2im.

The columns are built a block of images at a time, small enough to stay in cache, into one
array reused from block to block, and built again in backward rather than kept: they are
kh*kw times the size of the input.

With stride 1 and columns that outweigh the output (``_grid_width``), the products run over
whole rows of the padded image: the columns of a kernel offset are then one contiguous run of
each flattened image, which numpy copies several times faster than rows of OW, for kw-1 idle
columns per row that the output drops. (An infinite input value can meet a zero gradient in an
idle column, so a weight gradient that torch gives as inf may come out NaN: both non-finite.)
"""
import numpy as np

from ..function import Function, ShapeError

BLOCK_BYTES = 1 << 19  # the columns of one block of images
GRID_RATIO = 4  # whole padded rows when C*kh*kw >= GRID_RATIO * O (and stride 1)


class Conv2d(Function):
    """``conv2d(x, weight, bias, stride, padding)`` with x (N, C, H, W) and weight (O, C, kh, kw).

    ``stride`` and ``padding`` are ints or (height, width) pairs; padding adds zeros.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding):
        stride, padding = pair(stride, "stride", minimum=1), pair(padding, "padding", minimum=0)
        _check_conv_shapes(x, weight, bias, padding)
        n, (out_channels, _, kh, kw) = x.shape[0], weight.shape
        padded = pad_spatial(x, padding, value=0)
        out_h, out_w = output_size(padded.shape[2:], (kh, kw), stride)
        grid_w = _grid_width(padded.shape, weight.shape, stride)
        rows = weight.reshape(out_channels, -1)
        out = np.empty((n, out_channels, out_h, out_w), dtype=np.result_type(x, weight))
        # one array for the columns of every block, one for the products: they stay in cache
        size = _block_size(padded, (kh, kw), stride, grid_w)
        cols = np.empty((size, rows.shape[1], out_h * grid_w), dtype=padded.dtype)
        products = np.empty((size, out_channels, out_h * grid_w), dtype=out.dtype)
        for block in _split_batch(n, size):
            # one matrix product per image: the result is in (N, O, OH*G) order
            block_cols = im2col(padded[block], (kh, kw), stride, grid_w, out=cols)
            images = len(block_cols)
            if grid_w == out_w:
                np.matmul(rows, block_cols, out=out[block].reshape(images, out_channels, -1))
            else:
                product = np.matmul(rows, block_cols, out=products[:images])
                out[block] = product.reshape(images, out_channels, out_h, grid_w)[..., :out_w]
        if bias is not None:
            per_image = out.reshape(n, out_channels * out_h * out_w)  # numpy is slow on short rows
            per_image += np.repeat(bias, out_h * out_w)
        ctx.save_for_backward(padded, weight)
        ctx.geometry = (x.shape, padded.shape, stride, padding, grid_w)
        return out

    @staticmethod
    def backward(ctx, grad):
        padded, weight = ctx.saved_tensors
        x_shape, padded_shape, stride, padding, grid_w = ctx.geometry
        out_channels, channels, kh, kw = weight.shape
        rows = weight.reshape(out_channels, -1)
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        grad_padded = np.zeros(padded_shape, dtype=grad.dtype) if need_x else None
        grad_w = np.zeros(rows.shape, dtype=np.result_type(grad, padded)) if need_w else None
        size = _block_size(padded, (kh, kw), stride, grid_w)
        cols_shape = (size, rows.shape[1], grad.shape[2] * grid_w)
        cols = np.empty(cols_shape, dtype=padded.dtype) if need_w else None
        grad_cols = np.empty(cols_shape, dtype=np.result_type(weight, grad)) if need_x else None
        for block in _split_batch(len(grad), size) if need_x or need_w else ():
            grad_rows = _grid_rows(grad[block], grid_w)  # (N, O, OH*G)
            images = len(grad_rows)
            if need_w:
                # per image (O, OH*G) @ (OH*G, C*kh*kw), summed over the block
                block_cols = im2col(padded[block], (kh, kw), stride, grid_w, out=cols)
                grad_w += np.matmul(grad_rows, block_cols.transpose(0, 2, 1)).sum(axis=0)
            if need_x:
                patches = np.matmul(rows.T, grad_rows, out=grad_cols[:images])
                patches = patches.reshape(images, channels, kh * kw, grad.shape[2], grid_w)
                _add_patches(grad_padded[block], patches, (kh, kw), stride)
        grad_x = unpad_spatial(grad_padded, padding, x_shape) if need_x else None
        grad_w = grad_w.reshape(weight.shape) if need_w else None
        grad_b = np.einsum("nohw->o", grad) if need_b else None  # faster than grad.sum here
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


def im2col(padded, kernel, stride, grid_width=None, out=None):
    """Every ``kernel`` window of ``padded`` (N, C, H, W) at ``stride``, as (N, C*kh*kw, OH*G),
    with G = ``grid_width``, OW by default; written into ``out``[:N] if given.

    One slice copy per kernel offset. With stride 1, G may be W: the columns of offset (i, j)
    are then the flattened image from i*W + j on, and the last kw-1 columns of each row belong
    to no window (they hold other values, zeros on the last row).
    """
    n, channels, _, width = padded.shape
    out_h, out_w = output_size(padded.shape[2:], kernel, stride)
    grid_width = out_w if grid_width is None else grid_width
    count = kernel[0] * kernel[1]
    shape = (n, channels, count, out_h, grid_width)
    cols = np.empty(shape, dtype=padded.dtype) if out is None else out[:n].reshape(shape)
    if grid_width == out_w:
        for k, slab in enumerate(kernel_slabs(padded, kernel, stride, (out_h, out_w))):
            cols[:, :, k] = slab
    else:
        runs = cols.reshape(n, channels, count, -1)
        flat = padded.reshape(n, channels, -1)
        size = (out_h - 1) * width + out_w  # the last row stops at the end of the image
        runs[..., size:] = 0
        for k in range(count):
            shift = (k // kernel[1]) * width + k % kernel[1]
            runs[:, :, k, :size] = flat[..., shift:shift + size]
    return cols.reshape(n, channels * count, out_h * grid_width)


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
    """Add ``patches`` (N, C, kh*kw, OH, G), one slab per kernel offset, into ``grad`` (N, C,
    H, W), contiguous; G may be W with stride 1, as in ``im2col``, if the patches are zero
    beyond OW.

    Each slab goes to the window corners of a zeroed array like ``grad``, which is added to
    ``grad`` flat, shifted by the offset: numpy adds long contiguous runs several times faster
    than strided slabs.
    """
    (kh, kw), (sh, sw) = kernel, stride
    out_h, grid_width = patches.shape[3:]
    width = grad.shape[3]
    flat = grad.reshape(-1)
    buffer = np.zeros_like(grad)
    corners = buffer[:, :, :sh * out_h:sh, :sw * grid_width:sw]
    buffer = buffer.reshape(-1)
    for k in range(kh * kw):
        corners[...] = patches[:, :, k]
        shift = (k // kw) * width + k % kw
        flat[shift:] += buffer[:flat.size - shift]


def _grid_width(padded_shape, weight_shape, stride):
    """G, the columns per output row in the matrix products: the padded width W with stride 1
    when the columns (C*kh*kw rows) outweigh the output (O rows), which then needs cropping;
    else OW."""
    out_channels, channels, kh, kw = weight_shape
    if stride == (1, 1) and channels * kh * kw >= GRID_RATIO * out_channels:
        return padded_shape[3]
    return output_size(padded_shape[2:], (kh, kw), stride)[1]


def _grid_rows(grad, grid_width):
    """``grad`` (N, O, OH, OW) as (N, O, OH*G), zero in the columns beyond OW."""
    n, channels, out_h, out_w = grad.shape
    if grid_width == out_w:
        return grad.reshape(n, channels, -1)
    rows = np.zeros((n, channels, out_h, grid_width), dtype=grad.dtype)
    rows[..., :out_w] = grad
    return rows.reshape(n, channels, -1)


def _split_batch(n, size):
    """Slices of ``size`` images over a batch of ``n`` (the last one may hold fewer)."""
    return [slice(start, start + size) for start in range(0, n, size)]


def _block_size(padded, kernel, stride, grid_width):
    """Images per block, of even blocks whose columns (rows of ``grid_width``) take at most
    ``BLOCK_BYTES`` each (or one image, if that is bigger)."""
    n, channels = padded.shape[:2]
    out_h = output_size(padded.shape[2:], kernel, stride)[0]
    image_bytes = channels * kernel[0] * kernel[1] * out_h * grid_width * padded.itemsize
    count = max(1, -(-n * image_bytes // BLOCK_BYTES))
    return max(1, -(-n // count))


def output_size(padded_hw, kernel, stride):
    """(OH, OW): how many windows fit along each axis of the padded input."""
    return tuple((size - k) // s + 1 for size, k, s in zip(padded_hw, kernel, stride))
