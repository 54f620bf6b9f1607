"""Numerical bugs in the loss: a softmax that overflows, a log of a probability that is 0.

Both need large logits to show, so they are planted in the ``confident_mlp`` bench (a
classifier whose logits reach the hundreds). minigrad: the cross-entropy op's forward is
patched; torch: the loss module's forward is swapped. Both put back when the block ends.
"""
import numpy as np

from minigrad.ops import loss

from .patching import patched_forward, swapped_forward


def softmax_without_max(bench):
    """``exp(z) / sum(exp(z))`` without subtracting ``max(z)`` first: exp overflows to inf."""
    if bench.backend == "minigrad":
        return patched_forward(loss.CrossEntropy, _minigrad_loss(_log_softmax_without_max))
    return swapped_forward(bench.loss_fn, _torch_softmax_without_max)


def log_without_epsilon(bench):
    """``log(softmax(z))``: a probability that underflows to 0 gives log(0) = -inf."""
    if bench.backend == "minigrad":
        return patched_forward(loss.CrossEntropy, _minigrad_loss(_log_of_softmax))
    return swapped_forward(bench.loss_fn, _torch_log_of_softmax)


# ------------------------------------------------------------------- minigrad
def _minigrad_loss(log_softmax):
    """A cross-entropy forward (class-index targets, mean) with ``log_softmax`` swapped in; the
    right forward runs first for its checks and the fields backward reads."""
    def forward(right, ctx, logits, target, reduction="mean"):
        right(ctx, logits, target, reduction)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            log_probs = log_softmax(logits)
        ctx.save_for_backward(log_probs, target)
        picked = np.take_along_axis(log_probs, target[:, None], axis=1)
        return -picked.mean()
    return forward


def _log_softmax_without_max(z):
    exp = np.exp(z)                        # bug: np.exp(z - z.max(axis=1, keepdims=True))
    return np.log(exp / exp.sum(axis=1, keepdims=True))


def _log_of_softmax(z):
    exp = np.exp(z - z.max(axis=1, keepdims=True))
    return np.log(exp / exp.sum(axis=1, keepdims=True))     # bug: log of a probability


# ---------------------------------------------------------------------- torch
def _torch_softmax_without_max(self, logits, target):
    exp = logits.exp()                     # bug: (logits - logits.max(1, keepdim=True)).exp()
    probs = exp / exp.sum(1, keepdim=True)
    return -probs.log().gather(1, target[:, None]).mean()


def _torch_log_of_softmax(self, logits, target):
    probs = logits.softmax(1)
    return -probs.log().gather(1, target[:, None]).mean()   # bug: log of a probability
