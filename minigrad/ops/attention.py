"""Scaled dot-product attention as one op, with torch's ``attn_mask``, ``is_causal``, ``scale``
and ``dropout_p``: ``softmax(q @ k.T * scale + mask) @ v``.

Backward reuses the probabilities saved by forward (the mask is in them: masked weights are
exactly 0), so nothing is recomputed.
"""
import math

import numpy as np

from .. import random
from ..function import Function, ShapeError
from .broadcast import unbroadcast


class ScaledDotProductAttention(Function):
    """q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev); batch dims broadcast.

    ``attn_mask``: boolean (True takes part) or float (added to the scores), broadcast to
    (..., L, S). ``is_causal``: query i sees keys 0..i (top-left aligned, as torch).
    ``dropout_p``: attention weights dropped with minigrad's generator, the rest scaled by
    ``1 / (1 - p)``; the same mask is applied again in backward.
    """

    @staticmethod
    def forward(ctx, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        if attn_mask is not None and is_causal:
            raise ValueError("scaled_dot_product_attention: pass attn_mask or is_causal, "
                             "not both")
        if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
            raise ShapeError(f"scaled_dot_product_attention: query {q.shape}, key {k.shape} "
                             f"and value {v.shape} do not fit (E of query and key, S of key "
                             f"and value must agree)")
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        scores = q @ np.swapaxes(k, -1, -2)
        scores *= q.dtype.type(scale)
        if is_causal:
            attn_mask = np.tril(np.ones(scores.shape[-2:], dtype=bool))
        if attn_mask is not None and attn_mask.dtype == bool:
            scores = np.where(attn_mask, scores, -np.inf)
        elif attn_mask is not None:
            scores = scores + attn_mask
        probs = softmax_array(scores, in_place=True)
        weights = probs
        drop = None
        if dropout_p > 0:
            keep = random.generator().random(probs.shape) >= dropout_p
            drop = keep.astype(q.dtype) * q.dtype.type(
                0.0 if dropout_p >= 1 else 1.0 / (1.0 - dropout_p))
            weights = probs * drop
        ctx.save_for_backward(q, k, v, probs, drop)
        ctx.scale = scale
        ctx.mask_shape = None if attn_mask is None else attn_mask.shape
        return weights @ v

    @staticmethod
    def backward(ctx, grad):
        q, k, v, probs, drop = ctx.saved_tensors
        weights = probs if drop is None else probs * drop
        grad_v = np.swapaxes(weights, -1, -2) @ grad
        grad_weights = grad @ np.swapaxes(v, -1, -2)
        grad_probs = grad_weights if drop is None else grad_weights * drop
        grad_scores = softmax_backward_array(probs, grad_probs)
        grad_q = grad_scores @ k * ctx.scale
        grad_k = np.swapaxes(grad_scores, -1, -2) @ q * ctx.scale
        grad_mask = None
        if ctx.needs_input_grad[3]:
            grad_mask = unbroadcast(grad_scores, ctx.mask_shape)
        return (unbroadcast(grad_q, q.shape), unbroadcast(grad_k, k.shape),
                unbroadcast(grad_v, v.shape), grad_mask, None, None, None)


def softmax_array(scores, *, in_place=False):
    """Softmax over the last axis (into ``scores`` itself when ``in_place``); a row with every
    score at -inf gives NaN, as in torch."""
    out = scores if in_place else np.array(scores, copy=True)
    out -= out.max(axis=-1, keepdims=True)
    np.exp(out, out=out)
    out /= out.sum(axis=-1, keepdims=True)
    return out


def softmax_backward_array(probs, grad_probs):
    """d scores from d probs: ``p * (g - sum(g * p))`` over the last axis."""
    weighted = grad_probs * probs
    return probs * (grad_probs - weighted.sum(axis=-1, keepdims=True))
