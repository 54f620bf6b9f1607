"""Batch norm (statistics per channel, axis 1) and layer norm (statistics over trailing axes)."""
import numpy as np

from ..function import Function, ShapeError


class BatchNorm(Function):
    """``batch_norm`` over (N, C) or (N, C, ...) inputs, torch's semantics.

    With batch statistics (training, or no running statistics) the running buffers, when
    given, are updated in place: ``running = (1 - momentum) * running + momentum * batch``,
    with the unbiased batch variance. Otherwise the running statistics normalize.
    """

    @staticmethod
    def forward(ctx, x, running_mean, running_var, weight, bias, training, momentum, eps):
        _check_channel_shapes(x, running_mean=running_mean, running_var=running_var,
                              weight=weight, bias=bias)
        stat_shape = channel_shape(x)
        use_batch = training or running_mean is None or running_var is None
        if use_batch:
            count = x.size // x.shape[1]
            if count <= 1:
                raise ValueError(f"batch_norm: expected more than 1 value per channel when "
                                 f"training, got input of shape {x.shape}")
            mean = channel_sums(x) / count
            centered = x - mean.reshape(stat_shape)
            var = channel_sums(centered, centered) / count
            if training and running_mean is not None:
                running_mean *= 1 - momentum
                running_mean += momentum * mean
            if training and running_var is not None:
                running_var *= 1 - momentum
                running_var += momentum * var * (count / (count - 1))
        else:
            centered = x - running_mean.reshape(stat_shape)
            var = running_var
        invstd = (1.0 / np.sqrt(var + eps)).astype(x.dtype).reshape(stat_shape)
        x_hat = centered
        x_hat *= invstd
        if weight is None:
            out = x_hat if bias is None else x_hat + bias.reshape(stat_shape)
        else:
            out = x_hat * weight.reshape(stat_shape)
            if bias is not None:
                out += bias.reshape(stat_shape)
        ctx.save_for_backward(x_hat, invstd, weight)
        ctx.use_batch = use_batch
        return out

    @staticmethod
    def backward(ctx, grad):
        x_hat, invstd, weight = ctx.saved_tensors
        stat_shape = channel_shape(grad)
        sum_grad = channel_sums(grad).reshape(stat_shape)
        sum_grad_x_hat = channel_sums(grad, x_hat).reshape(stat_shape)
        grad_x = None
        if ctx.needs_input_grad[0]:
            scale = invstd if weight is None else invstd * weight.reshape(stat_shape)
            if ctx.use_batch:
                count = grad.size // grad.shape[1]
                mean_term = sum_grad / count
                var_term = x_hat * (sum_grad_x_hat / count)
                grad_x = grad - mean_term
                grad_x -= var_term
                grad_x *= scale
            else:
                grad_x = grad * scale
        grad_w = sum_grad_x_hat.reshape(-1) if ctx.needs_input_grad[3] else None
        grad_b = sum_grad.reshape(-1) if ctx.needs_input_grad[4] else None
        return grad_x, None, None, grad_w, grad_b, None, None, None


class LayerNorm(Function):
    """``layer_norm`` over the trailing ``len(normalized_shape)`` axes, with optional affine."""

    @staticmethod
    def forward(ctx, x, normalized_shape, weight, bias, eps):
        normalized_shape = _as_shape(normalized_shape)
        _check_layer_shapes(x, normalized_shape, weight=weight, bias=bias)
        axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
        x_hat = x - x.mean(axis=axes, keepdims=True)
        var = np.mean(np.square(x_hat), axis=axes, keepdims=True)
        invstd = 1.0 / np.sqrt(var + eps)
        x_hat *= invstd
        out = x_hat if weight is None else x_hat * weight
        if bias is not None:
            out = out + bias if weight is None else np.add(out, bias, out=out)
        ctx.save_for_backward(x_hat, invstd, weight)
        ctx.axes = axes
        return out

    @staticmethod
    def backward(ctx, grad):
        x_hat, invstd, weight = ctx.saved_tensors
        axes = ctx.axes
        leading = tuple(range(grad.ndim - len(axes)))
        grad_x_hat = grad if weight is None else grad * weight
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            mean_term = grad_x_hat.mean(axis=axes, keepdims=True)
            var_term = x_hat * (grad_x_hat * x_hat).mean(axis=axes, keepdims=True)
            grad_x = invstd * (grad_x_hat - mean_term - var_term)
        if ctx.needs_input_grad[2]:
            grad_w = (grad * x_hat).sum(axis=leading)
        if ctx.needs_input_grad[3]:
            grad_b = grad.sum(axis=leading)
        return grad_x, None, grad_w, grad_b, None


def channel_sums(a, b=None):
    """Per-channel (axis 1) sums of ``a``, or of ``a * b``, without a temporary of their size."""
    a = a.reshape(a.shape[0], a.shape[1], -1)
    if b is None:
        return np.einsum("ncl->c", a)
    return np.einsum("ncl,ncl->c", a, b.reshape(a.shape))


def channel_shape(x):
    """The shape (1, C, 1, ...) that broadcasts a per-channel vector against ``x``."""
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _check_channel_shapes(x, **per_channel):
    if x.ndim < 2:
        raise ShapeError(f"batch_norm: expected an input of shape (N, C) or (N, C, ...), "
                         f"got {x.shape}")
    for name, value in per_channel.items():
        if value is not None and value.shape != (x.shape[1],):
            raise ShapeError(f"batch_norm: {name} has shape {value.shape} but the input "
                             f"{x.shape} has {x.shape[1]} channels")


def _as_shape(normalized_shape):
    if isinstance(normalized_shape, (int, np.integer)):
        return (int(normalized_shape),)
    return tuple(int(n) for n in normalized_shape)


def _check_layer_shapes(x, normalized_shape, **affine):
    count = len(normalized_shape)
    if count == 0 or x.ndim < count or x.shape[x.ndim - count:] != normalized_shape:
        raise ShapeError(f"layer_norm: normalized_shape {normalized_shape} does not match the "
                         f"trailing dimensions of the input {x.shape}")
    for name, value in affine.items():
        if value is not None and value.shape != normalized_shape:
            raise ShapeError(f"layer_norm: {name} has shape {value.shape}, expected "
                             f"normalized_shape {normalized_shape}")
