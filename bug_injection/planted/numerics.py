"""Numerical bugs in a hand-written cross-entropy: a softmax that overflows, a log of a
probability that is 0.

The bench's loss module gets a forward that computes the loss from its parts, written once
with the tensor methods minigrad and torch share, so each framework's autograd differentiates
the naive formula just as it would the user's own code. Both bugs need large logits to show,
so they are planted in the ``confident_mlp`` bench (a classifier whose logits reach the
hundreds). The loss module's own forward is back when the block ends.
"""
from .patching import swapped_forward


def softmax_without_max(bench):
    """``exp(z) / sum(exp(z))`` without subtracting ``max(z)`` first: exp overflows to inf."""
    return swapped_forward(bench.loss_fn, _cross_entropy_softmax_without_max)


def log_without_epsilon(bench):
    """``log(softmax(z))``: a probability that underflows to 0 gives log(0) = -inf, and its
    gradient 1/p is infinite."""
    return swapped_forward(bench.loss_fn, _cross_entropy_log_of_softmax)


def _cross_entropy_softmax_without_max(self, logits, target):
    exp = logits.exp()                      # bug: (logits - logits.amax(1, keepdim=True)).exp()
    probs = exp / exp.sum(1, keepdim=True)
    return -probs.log().gather(1, target[:, None]).mean()


def _cross_entropy_log_of_softmax(self, logits, target):
    exp = (logits - logits.amax(1, keepdim=True)).exp()
    probs = exp / exp.sum(1, keepdim=True)
    return -probs.log().gather(1, target[:, None]).mean()     # bug: log of a probability
