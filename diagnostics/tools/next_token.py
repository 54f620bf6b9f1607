"""Next-token targets: does a causal language model's loss score position t against token t + 1?

A causal model's output at position t sees the input tokens up to t. Scored against token t
itself (``labels = input_ids`` given to a loss that does not shift them), it learns to copy
its input: the training loss falls to almost zero and generation is garbage. Scored against
token t + 2 (labels shifted before a loss or model that shifts them again), it learns the token
after next. The user's ``loss_fn`` is the authority on where it shifts, so nothing here
assumes a convention: the token each position is scored against is read from the loss's
gradient on the logits (cross-entropy's is ``softmax - one_hot(target)``, lowest at the
target, also with label smoothing), then compared with the input tokens at t - 1, t, t + 1 and
t + 2. Positions the loss ignores (no gradient) are left out.

A model given ``labels=`` computes its loss inside ``forward`` (the Hugging Face convention),
and ``loss_fn`` only reads it out: the model itself is the loss. Its gradient is then read on
the logits of a fresh forward, through the model's own loss call, so that a model that shifts
internally (GPT-2) is judged by what its loss rewards, like one that forgot to.
"""
import numpy as np

from .. import outputs
from ..findings import Finding

MIN_POSITIONS = 16     # scored positions needed to tell an offset from coincidence
MATCHED = 0.9          # share of the positions that must match the wrong offset
NEXT_AT_MOST = 0.5     # ... while at most this share matches the next token
OFFSETS = (0, 2, -1)   # the wrong offsets, in the order they are reported
SUMS_TO_ZERO = 1e-4    # |sum over the classes| / largest entry: a class distribution's gradient
                       # (softmax - target) sums to 0 up to rounding
UNPULLED = 1e-6        # a position whose lowest entry is above -this * largest: not scored


def misaligned_targets(backend, batch, output, key):
    """``(judged, summary, [Finding])``: TARGETS_MISALIGNED when the loss scores the logits at
    position t against the input token at t, t + 2 or t - 1 instead of t + 1. ``judged`` is
    False (and ``summary`` says why) when it cannot be read: no integer input ``(B, T)``
    beside logits ``(B, T, V)`` or ``(B, V, T)``, a loss whose gradient on them is not one
    class distribution per position, too few scored positions, or targets that are none of the
    input tokens near t (not a next-token loss on these inputs)."""
    unread = (False, "needs integer token inputs (batch, positions), logits (batch, positions, "
                     "vocabulary) and a loss over classes", [])
    logits = backend.to_numpy(outputs.pick(output, key))
    if logits.ndim != 3:
        return unread
    grad = outputs.loss_gradient(backend, batch.loss_fn, output, key, logits.copy(),
                                 batch.targets)
    inside = grad is None
    if inside:   # loss_fn reads a loss the model computed: read the model's own loss
        grad, why = outputs.model_loss_gradient(backend, batch, key)
        if grad is None:
            return False, why, []
    scored = scored_tokens(grad)
    tokens = None if scored is None else _token_ids(backend, batch, scored.shape)
    if tokens is None:
        return unread
    return judge(scored, tokens, inside_model=inside)


def judge(scored, tokens, *, inside_model=False):
    """``(judged, summary, [Finding])`` from the class each position is scored against
    (``scored``, ``(B, T)``, -1 where unscored) and the input tokens ``(B, T)``.
    ``inside_model``: the loss is the model's own (computed in forward from ``labels=``)."""
    shares = {offset: _share(scored, tokens, offset) for offset in (1,) + OFFSETS}
    matched_next, compared = shares[1]
    whose = " (the model's own loss)" if inside_model else ""
    if compared < MIN_POSITIONS:
        return False, f"only {compared} scored positions: too few to read", []
    if matched_next > NEXT_AT_MOST:
        return True, (f"{matched_next:.0%} of {compared} scored positions t are scored "
                      f"against the input token t + 1{whose}"), []
    wrong = next((offset for offset in OFFSETS if shares[offset][1] >= MIN_POSITIONS
                  and shares[offset][0] >= MATCHED), None)
    if wrong is None:
        return False, (f"the targets are none of the input tokens t - 1 .. t + 2 "
                       f"({matched_next:.0%} are t + 1): not a next-token loss on these "
                       f"inputs"), []
    share, compared = shares[wrong]
    where = f"input token t{wrong:+d}" if wrong else "input token t itself"
    return True, (f"position t is scored against {where}, not t + 1 ({share:.0%} of "
                  f"{compared} scored positions){whose}"), [
        _finding(wrong, shares, inside_model=inside_model)]


def _token_ids(backend, batch, shape):
    """The integer input of ``shape`` ``(B, T)``: the keyword ``input_ids`` first, else the
    first such input; None when there is none."""
    values = [batch.kwargs[k] for k in ("input_ids",) if k in batch.kwargs]
    values += list(batch.args) + [v for k, v in batch.kwargs.items() if k != "input_ids"]
    for value in values:
        if not backend.is_tensor(value):
            continue
        array = backend.to_numpy(value)
        if array.dtype.kind in "iu" and array.shape == tuple(shape):
            return array.astype(np.int64)
    return None


def scored_tokens(grad):
    """Per position ``(B, T)``, the class the loss pulls the logits towards (the lowest entry of
    its gradient ``grad`` on them), -1 where the loss gives no gradient; None when the gradient
    is not a class distribution's along the last axis or the second (its entries summing to 0
    at every position, as cross-entropy's do: the loss, not a convention, tells the class
    axis)."""
    grad = grad.astype(np.float64)
    scale = np.abs(grad).max()
    if not np.isfinite(scale) or scale == 0:
        return None
    axis = next((a for a in (2, 1) if grad.shape[a] >= 2
                 and np.abs(grad.sum(axis=a)).max() <= SUMS_TO_ZERO * scale), None)
    if axis is None:
        return None
    grad = np.moveaxis(grad, axis, -1)
    return scored_from(grad.argmin(axis=-1), grad.min(axis=-1), scale,
                       np.abs(grad.sum(axis=-1)).max())


def scored_from(lowest_class, lowest, scale, row_sum):
    """The reading of ``scored_tokens`` from four reductions of the gradient over its class
    axis (what the Monitor brings from the device): the lowest entry's class and value per
    position, the largest magnitude, and the largest |sum over the classes|. None when the
    rows do not sum to 0 (not one class distribution per position) or nothing is scored."""
    scale, row_sum = float(scale), float(row_sum)
    if not np.isfinite(scale) or scale == 0 or not row_sum <= SUMS_TO_ZERO * scale:
        return None
    scored = np.asarray(lowest_class, dtype=np.int64).copy()
    scored[np.asarray(lowest, dtype=np.float64) >= -UNPULLED * scale] = -1
    return scored


def _share(scored, tokens, offset):
    """``(share of the scored positions t whose class is the input token at t + offset, how
    many were compared)``."""
    steps = tokens.shape[1]
    lo, hi = max(0, -offset), min(steps, steps - offset)
    if hi <= lo:
        return 0.0, 0
    here = scored[:, lo:hi]
    there = tokens[:, lo + offset:hi + offset]
    counted = here >= 0
    compared = int(counted.sum())
    return (float((here == there)[counted].mean()) if compared else 0.0), compared


def _finding(offset, shares, *, inside_model=False):
    share, compared = shares[offset]
    next_share = shares[1][0]
    where = {0: "token t of the input itself", 2: "token t + 2, the one after next",
             -1: "token t - 1, the one before"}[offset]
    why = {0: "a causal model sees token t at position t, so it learns to copy its input: the "
              "training loss falls to almost 0 and generation is garbage",
           2: "the targets are shifted twice (before the loss, and again by the loss or the "
              "model): the model learns to predict the token after next",
           -1: "the shift goes the wrong way: the model is taught the token it has just seen"}
    fix = {0: "shift the targets by one: score logits[:, :-1] against input_ids[:, 1:] (pass "
              "labels = input_ids only to a model or loss that shifts them itself, as Hugging "
              "Face's *ForCausalLM do)",
           2: "shift once: either pass labels = input_ids to a model or loss that shifts them "
              "itself, or shift them yourself for one that does not",
           -1: "score logits[:, :-1] against tokens[:, 1:], not logits[:, 1:] against "
               "tokens[:, :-1]"}
    if inside_model:   # the shift to fix is in the model's forward, or in the labels given it
        fix = {0: "shift inside forward: score logits[:, :-1] against labels[:, 1:], as "
                  "Hugging Face's *ForCausalLM do (or pass labels already shifted to a model "
                  "that does not shift)",
               2: "shift once: the model's forward shifts the labels, so pass labels = "
                  "input_ids unshifted",
               -1: "in forward, score logits[:, :-1] against labels[:, 1:], not logits[:, 1:] "
                   "against labels[:, :-1]"}
    loss = "the loss the model computes in forward" if inside_model else "the loss"
    return Finding(
        "TARGETS_MISALIGNED", "error", "model" if inside_model else "loss",
        f"{loss} scores the logits at position t against {where}, not the next token t + 1 "
        f"(read from the loss's gradient on the logits: {share:.0%} of {compared} scored "
        f"positions match it, {next_share:.0%} match the next token): {why[offset]}",
        fix[offset],
        {"offset": offset, "matched": share, "positions": compared,
         "next_token_matched": next_share})
