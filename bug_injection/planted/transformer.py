"""Transformer-era gradient bugs, planted in the GPT twin (``gpt.py``) on either framework.

The backwards people now write by hand are attention kernels, fused cross-entropies and
embedding lookups. Each bug below is that op's backward with one mistake, written once in
NumPy (the lines marked ``# bug``); ``functions.planted_function`` wraps it as a minigrad
``Function``
(the right op's forward, the wrong backward) or as a ``torch.autograd.Function`` (torch's
forward, the same NumPy backward on the saved inputs). The plant swaps one method of one
module (``attend`` of an attention module, ``forward`` of the embedding or of the loss) for
one that calls the planted Function, so the other blocks stay right.

One more bug lives in the autograd engine itself: a tied weight whose second gradient
overwrites the first. It is planted in minigrad's engine, scoped to the tied parameter. torch's
engine sums every use of a leaf before accumulating and cannot be patched, so there the same
wrong gradient is made where a user would make it: the output head's Function returns no
gradient for the shared weight, leaving only the embedding's.
"""
import contextlib
import math
import types

import numpy as np

from minigrad import autograd
from minigrad.ops import attention

from .functions import planted_function
from .patching import marked, patched_attribute

MARKER = "_gradhunt_tied"


# ------------------------------------------------------------- the wrong backwards
# Each gets the op's arguments as forward got them (arrays, options) and d loss / d output,
# and returns one gradient per argument, like the op's own backward.
def attention_mask_not_in_backward(inputs, grad):
    """Backward recomputes the attention weights (as flash attention does) without the causal
    mask: every query also "attended" to the keys after it."""
    q, k, v, _, _, _, scale = inputs
    scale = _scale(q, scale)
    probs = _softmax(q @ k.swapaxes(-1, -2) * scale)      # bug: mask the future before softmax
    return _attention_grads(q, k, v, probs, grad, scale)


def attention_softmax_no_subtraction(inputs, grad):
    q, k, v, _, _, _, scale = inputs
    scale = _scale(q, scale)
    probs = _causal_probs(q, k, scale)
    grad_probs = grad @ v.swapaxes(-1, -2)
    grad_scores = probs * grad_probs      # bug: probs * (grad_probs - sum(grad_probs * probs))
    return _attention_grads(q, k, v, probs, grad, scale, grad_scores=grad_scores)


def attention_scale_forward_only(inputs, grad):
    q, k, v, _, _, _, scale = inputs
    scale = _scale(q, scale)
    probs = _causal_probs(q, k, scale)
    grad_q, grad_k, grad_v, *rest = _attention_grads(q, k, v, probs, grad, scale)
    return (grad_q / scale, grad_k / scale, grad_v, *rest)   # bug: the scale of forward dropped


def attention_values_untransposed(inputs, grad):
    """The value gradient multiplies by the attention weights as they are, where their
    transpose belongs (silent in self-attention: the weights are square)."""
    q, k, v, _, _, _, scale = inputs
    scale = _scale(q, scale)
    probs = _causal_probs(q, k, scale)
    grad_q, grad_k, _, *rest = _attention_grads(q, k, v, probs, grad, scale)
    grad_v = probs @ grad                                   # bug: probs.swapaxes(-1, -2) @ grad
    return (grad_q, grad_k, grad_v, *rest)


def embedding_grad_assigned(inputs, grad):
    """Each looked-up row's gradient is assigned into the table, not added: a token that
    appears twice keeps only one of its gradients."""
    indices, weight = inputs
    grad_weight = np.zeros(weight.shape, dtype=grad.dtype)
    grad_weight[indices.reshape(-1)] = grad.reshape(-1, weight.shape[1])   # bug: np.add.at
    return None, grad_weight


def head_weight_gradient_lost(inputs, grad):
    """The tied output head sends no gradient to the shared weight: only the embedding's use
    counts, as when the embedding's gradient overwrites the head's."""
    x, weight, _ = inputs
    return grad @ weight, None, None        # bug: grad.T @ x for the weight, summed over rows


def cross_entropy_counts_ignored(inputs, grad):
    """The mean's gradient divides by every position, padding included, where the forward
    divides by the positions it keeps."""
    logits, target, _, ignore_index, _ = inputs
    kept = target != ignore_index
    onehot = np.eye(logits.shape[1], dtype=logits.dtype)[np.where(kept, target, 0)]
    grad_logits = (_softmax(logits) - onehot) * kept[:, None] * grad / target.size
    return grad_logits, None, None, None, None    # bug: / kept.sum(), the count of kept targets


# ------------------------------------------------------------------- right parts
def _scale(q, scale):
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale


def _softmax(scores):
    return attention.softmax_array(np.asarray(scores, dtype=np.float64))


def _causal_probs(q, k, scale):
    scores = q @ k.swapaxes(-1, -2) * scale
    future = ~np.tril(np.ones(scores.shape[-2:], dtype=bool))
    return _softmax(np.where(future, -np.inf, scores))


def _attention_grads(q, k, v, probs, grad, scale, *, grad_scores=None):
    """The gradients of (q, k, v, attn_mask, dropout_p, is_causal, scale), dropout off."""
    if grad_scores is None:
        grad_scores = attention.softmax_backward_array(probs, grad @ v.swapaxes(-1, -2))
    grad_v = probs.swapaxes(-1, -2) @ grad
    return (grad_scores @ k * scale, grad_scores.swapaxes(-1, -2) @ q * scale, grad_v, None,
            None, None, None)


# --------------------------------------------------------------- wrapping, planting
def _swapped_method(module, name, method):
    """``module.<name>`` -> ``method`` bound to it (a deep copy of the model binds the copy)."""
    return patched_attribute(module, name, types.MethodType(method, module))


def _attend(function):
    def attend(self, q, k, v):
        return function.apply(q, k, v, None, 0.0, True, None)
    return attend


def _lookup(function):
    def forward(self, indices):
        return function.apply(indices, self.weight)
    return forward


def _linear(function):
    def forward(self, x):
        return function.apply(x, self.weight, self.bias)
    return forward


def _next_token_loss(function):
    def forward(self, logits, targets):
        return function.apply(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), "mean",
                              self.ignore_index, 0.0)
    return forward


@contextlib.contextmanager
def _planted(bench, module, kind, wrong, method_name, make_method):
    target = bench.loss_fn if module == "loss" else bench.module(module)
    function = planted_function(bench.backend, kind, wrong)
    with _swapped_method(target, method_name, make_method(function)):
        yield


# ----------------------------------------------------------------------- plants
def plant_attention_mask_not_in_backward(bench, module):
    return _planted(bench, module, "attention", attention_mask_not_in_backward, "attend", _attend)


def plant_attention_softmax_no_subtraction(bench, module):
    return _planted(bench, module, "attention", attention_softmax_no_subtraction, "attend",
                    _attend)


def plant_attention_scale_forward_only(bench, module):
    return _planted(bench, module, "attention", attention_scale_forward_only, "attend", _attend)


def plant_attention_values_untransposed(bench, module):
    return _planted(bench, module, "attention", attention_values_untransposed, "attend", _attend)


def plant_embedding_grad_assigned(bench, module):
    return _planted(bench, module, "embedding", embedding_grad_assigned, "forward", _lookup)


def plant_cross_entropy_counts_ignored(bench, module):
    """``module`` is "loss": the bench's next-token loss."""
    return _planted(bench, module, "cross_entropy", cross_entropy_counts_ignored, "forward",
                    _next_token_loss)


def plant_tied_gradient_overwritten(bench, module):
    """``module`` is the embedding whose weight the output head ``lm_head`` shares."""
    if bench.backend == "minigrad":
        return _engine_overwrites(bench.module(module).weight)
    return _planted(bench, "lm_head", "linear", head_weight_gradient_lost, "forward", _linear)


@contextlib.contextmanager
def _engine_overwrites(weight):
    """minigrad's engine, for ``weight`` only: a gradient arriving at it replaces the one
    already there instead of adding to it. The output head's gradient arrives first, the
    embedding's second and wins."""
    right = autograd._send

    def send(pending, tensor, grad):
        if getattr(tensor, MARKER, False):
            pending[id(tensor)] = grad           # bug: add to what the other use sent
        else:
            right(pending, tensor, grad)

    with marked(weight, MARKER), patched_attribute(autograd, "_send", send):
        yield
