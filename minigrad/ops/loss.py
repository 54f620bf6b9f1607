"""Losses: cross-entropy (fused log-softmax + NLL), mean squared error, BCE with logits."""
import warnings

import numpy as np
from scipy import special

from ..function import Function, ShapeError
from .broadcast import unbroadcast
from .softmax import log_softmax_array

_REDUCTIONS = ("mean", "sum", "none")


class CrossEntropy(Function):
    """Log-softmax over the class dim, then the negative log-likelihood, as one op.

    ``logits`` is (C,) or (N, C, d1, ...); ``target`` holds class indices (integers, the
    logits' shape without the class dim) or class probabilities (floats, the logits' shape).
    As torch: index targets equal to ``ignore_index`` add nothing and are left out of the
    mean's count; ``label_smoothing`` mixes the target with the uniform distribution,
    ``(1 - eps) * target + eps / C``. For index targets and the mean, backward is
    ``(softmax - smoothed onehot) / kept``, zero on ignored positions.
    """

    @staticmethod
    def forward(ctx, logits, target, reduction="mean", ignore_index=-100, label_smoothing=0.0):
        check_reduction("cross_entropy", reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got "
                             f"{label_smoothing}")
        axis = _class_axis(logits)
        indices = _check_ce_target(logits, target, axis, ignore_index)
        log_probs = log_softmax_array(logits, axis)
        classes = logits.shape[axis]
        if indices:
            kept = target != ignore_index
            safe = np.where(kept, target, 0)
            nll = -np.take_along_axis(log_probs, np.expand_dims(safe, axis), axis).squeeze(axis)
            losses = (1 - label_smoothing) * nll
            if label_smoothing:
                losses = losses - label_smoothing / classes * log_probs.sum(axis=axis)
            losses = np.where(kept, losses, 0).astype(logits.dtype, copy=False)
            count = int(kept.sum())
            target = safe
        else:
            kept = None
            target = target.astype(logits.dtype, copy=False)
            if label_smoothing:
                target = (1 - label_smoothing) * target + label_smoothing / classes
            losses = -(target * log_probs).sum(axis=axis)
            count = losses.size
        ctx.save_for_backward(log_probs, target, kept)
        ctx.axis, ctx.indices, ctx.reduction = axis, indices, reduction
        ctx.smoothing, ctx.count = label_smoothing, count
        if reduction == "mean" and indices:
            return np.asarray(losses.sum() / count if count else np.nan, dtype=logits.dtype)
        return reduce_losses(losses, reduction)

    @staticmethod
    def backward(ctx, grad):
        log_probs, target, kept = ctx.saved_tensors
        axis = ctx.axis
        scale = spread_loss_grad(grad, ctx.reduction, ctx.count)
        if ctx.reduction == "none":
            scale = np.expand_dims(scale, axis)
        softmax = np.exp(log_probs)
        if ctx.indices:
            onehot = _one_hot(target, log_probs.shape, axis, log_probs.dtype)
            smoothed = (1 - ctx.smoothing) * onehot + ctx.smoothing / log_probs.shape[axis]
            kept = np.expand_dims(kept, axis)
            return (softmax - smoothed) * (scale * kept), None, None, None, None
        mass = target.sum(axis=axis, keepdims=True)
        grad_logits = (softmax * mass - target) * scale if ctx.needs_input_grad[0] else None
        grad_target = None
        if ctx.needs_input_grad[1]:
            grad_target = -log_probs * scale * (1 - ctx.smoothing)
        return grad_logits, grad_target, None, None, None


class MSELoss(Function):
    """Mean squared error; a target of another shape is broadcast, with torch's warning."""

    @staticmethod
    def forward(ctx, input, target, reduction="mean"):
        check_reduction("mse_loss", reduction)
        _check_broadcast("mse_loss", input.shape, target.shape)
        diff = input - target
        ctx.save_for_backward(diff)
        ctx.shapes, ctx.reduction = (input.shape, target.shape), reduction
        return reduce_losses(diff * diff, reduction)

    @staticmethod
    def backward(ctx, grad):
        (diff,) = ctx.saved_tensors
        shape_input, shape_target = ctx.shapes
        grad_diff = 2 * spread_loss_grad(grad, ctx.reduction, diff.size) * diff
        grad_input = unbroadcast(grad_diff, shape_input) if ctx.needs_input_grad[0] else None
        grad_target = unbroadcast(-grad_diff, shape_target) if ctx.needs_input_grad[1] else None
        return grad_input, grad_target, None


class BCEWithLogits(Function):
    """Binary cross-entropy on logits: ``max(x, 0) - x * t + log(1 + exp(-|x|))``, stable."""

    @staticmethod
    def forward(ctx, logits, target, reduction="mean"):
        check_reduction("binary_cross_entropy_with_logits", reduction)
        if logits.shape != target.shape:
            raise ShapeError(
                f"binary_cross_entropy_with_logits: target of shape {target.shape} must have "
                f"the input's shape {logits.shape}")
        ctx.save_for_backward(logits, target)
        ctx.reduction = reduction
        losses = np.maximum(logits, 0) - logits * target + np.log1p(np.exp(-np.abs(logits)))
        return reduce_losses(losses, reduction)

    @staticmethod
    def backward(ctx, grad):
        logits, target = ctx.saved_tensors
        scale = spread_loss_grad(grad, ctx.reduction, logits.size)
        grad_logits = (special.expit(logits) - target) * scale if ctx.needs_input_grad[0] else None
        grad_target = -logits * scale if ctx.needs_input_grad[1] else None
        return grad_logits, grad_target, None


def check_reduction(op, reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def reduce_losses(losses, reduction):
    """Per-element ``losses`` reduced as ``reduction`` says."""
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    return losses


def spread_loss_grad(grad, reduction, count):
    """The gradient of a reduced loss with respect to each of its ``count`` per-element losses."""
    return grad / count if reduction == "mean" else grad


def _class_axis(logits):
    if logits.ndim == 0:
        raise ShapeError("cross_entropy: input must have a class dimension, got a 0-d input")
    return 1 if logits.ndim >= 2 else 0


def _check_ce_target(logits, target, axis, ignore_index):
    """True for class-index targets, False for probabilities; a clear error for anything else."""
    index_shape = logits.shape[:axis] + logits.shape[axis + 1:]
    if target.dtype.kind in "iu":
        if target.shape != index_shape:
            raise ShapeError(
                f"cross_entropy: class-index targets for an input of shape {logits.shape} must "
                f"have shape {index_shape} (one class per sample), got {target.shape}")
        classes = logits.shape[axis]
        counted = target[target != ignore_index]
        if counted.size and (counted.min() < 0 or counted.max() >= classes):
            raise IndexError(
                f"cross_entropy: class indices must lie in [0, {classes}) or equal ignore_index "
                f"({ignore_index}), got values from {counted.min()} to {counted.max()}")
        return True
    if target.dtype.kind == "f":
        if target.shape == logits.shape:
            return False
        raise ShapeError(
            f"cross_entropy: float targets are class probabilities and must have the input's "
            f"shape {logits.shape}, got {target.shape}; for class labels pass integer (int64) "
            f"indices of shape {index_shape}")
    raise TypeError(
        f"cross_entropy: target must hold int64 class indices or float probabilities, "
        f"got dtype {target.dtype}")


def _one_hot(target, shape, axis, dtype):
    onehot = np.zeros(shape, dtype=dtype)
    np.put_along_axis(onehot, np.expand_dims(target, axis), 1, axis)
    return onehot


def _check_broadcast(op, input_shape, target_shape):
    if input_shape == target_shape:
        return
    try:
        np.broadcast_shapes(input_shape, target_shape)
    except ValueError:
        raise ShapeError(f"{op}: target of shape {target_shape} cannot be broadcast with the "
                         f"input of shape {input_shape}") from None
    warnings.warn(
        f"{op}: using a target of shape {target_shape} that differs from the input shape "
        f"{input_shape}; it will be broadcast, which is likely not what you want",
        UserWarning, stacklevel=5)
