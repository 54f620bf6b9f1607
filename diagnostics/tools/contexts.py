"""Targets the model cannot tell apart, for ``overfit_one_batch``: positions whose inputs, as
far as the model can see them, are identical, and whose class targets differ. No model can
memorise such a batch: two identical input rows with two labels, every sequence starting with
the same token (a causal model's first position then has one context and several next
tokens), a bigram model whose token is followed by different tokens. The lowest loss there is
the entropy of the targets given that context, not 0.

What a model can see is read from the batch and checked on the model's own outputs, never
assumed: identical input rows always give identical outputs (a per-example model); for
sequences, coarser contexts are tried in turn (the token alone, the token at its position, the
tokens up to it), each accepted only when the model's outputs in eval mode are the same for
every position sharing one and not the same everywhere (a zero-initialised head, equal for
every input, shows nothing).
"""
import contextlib
from dataclasses import dataclass

import numpy as np

from . import _training as T

SAME_OUTPUT = 1e-4     # relative to the largest logit: outputs this close are the same
VARIED_OUTPUT = 1e-2   # ...and outputs that vary by more than this are not one constant


@dataclass(frozen=True)
class SharedContexts:
    """``groups``: for each target position (the targets' shape), the index of what the model
    sees there; ``kind``: that context in words; ``positions``: how many positions share
    theirs with a different target; ``total``: how many positions have a target."""

    groups: np.ndarray
    kind: str
    positions: int
    total: int

    @property
    def reason(self):
        """``"12 of 64 target positions share the same preceding tokens with a different
        target"``."""
        return (f"{self.positions} of {self.total} target positions share {self.kind} with a "
                f"different target")


def shared_contexts(backend, batch, targets, valid):
    """The ``SharedContexts`` of class-index ``targets`` (ndarray, ``valid`` marks those the
    loss scores) when some positions the model cannot tell apart carry different targets;
    None when every context has one target (or the inputs cannot be read per example)."""
    arrays = _input_arrays(backend, batch)
    if not arrays or targets.ndim < 1 or targets.shape[0] != batch.batch_size:
        return None
    eval_logits = None
    for kind, groups in _sequence_candidates(arrays, targets.shape):
        found = _contradicted(groups, targets, valid)   # coarsest first: none here, none in
        if found is None:                                # a finer context either
            return None
        if eval_logits is None:
            eval_logits = _eval_logits(backend, batch, targets)
        if eval_logits is not None and _outputs_follow(eval_logits, groups):
            return SharedContexts(groups.reshape(targets.shape), kind, *found)
    size = targets.shape[0]
    row = _ids(np.concatenate([_bytes(a) for a in arrays], axis=1))
    within = np.arange(targets.size) % (targets.size // size)
    groups = _ids(np.stack([np.repeat(row, targets.size // size), within], axis=1))
    found = _contradicted(groups, targets, valid)
    if found is None:
        return None
    return SharedContexts(groups.reshape(targets.shape), "identical input rows", *found)


def group_logits(groups, targets, valid, classes, scale):
    """Logits of shape ``targets.shape + (classes,)``, the same for every position of a group:
    ``scale`` for a class the group's targets all take, ``scale + log p`` (at least 0) for one
    a share ``p`` of them take, 0 for the rest: cross-entropy's best shared logits as
    ``scale`` grows, and ``scale * one_hot`` where a group has one target."""
    flat, labels, keep = groups.reshape(-1), targets.reshape(-1), valid.reshape(-1)
    count = int(flat.max()) + 1 if flat.size else 0
    table = np.zeros((count, classes))
    np.add.at(table, (flat[keep], labels[keep]), 1.0)
    totals = table.sum(axis=1, keepdims=True)
    share = np.divide(table, totals, out=np.zeros_like(table), where=totals > 0)
    with np.errstate(divide="ignore"):
        logits = np.where(share > 0, np.maximum(scale + np.log(share), 0.0), 0.0)
    return logits[flat].reshape(targets.shape + (classes,))


def best_accuracy(groups, targets, valid):
    """The highest share of scored positions any model gets right: each group's most common
    target."""
    flat, labels = groups.reshape(-1)[valid.reshape(-1)], targets.reshape(-1)[valid.reshape(-1)]
    if not flat.size:
        return 1.0
    pairs, counts = np.unique(np.stack([flat, labels], axis=1), axis=0, return_counts=True)
    best = np.zeros(int(flat.max()) + 1, dtype=np.int64)
    np.maximum.at(best, pairs[:, 0], counts)
    return float(best.sum() / flat.size)


# ----------------------------------------------------------------- reading the batch
def _input_arrays(backend, batch):
    """The per-example inputs (leading axis the batch's) as arrays; None when an input is
    neither a tensor nor a plain value every example shares (an object the forward reads)."""
    size, arrays = batch.batch_size, []
    for value in list(batch.args) + [batch.kwargs[key] for key in sorted(batch.kwargs)]:
        if not backend.is_tensor(value):
            if isinstance(value, (bool, int, float, str, type(None))):
                continue                     # a flag every example shares
            return None
        array = np.ascontiguousarray(backend.to_numpy(value))
        if array.ndim and array.shape[0] == size:
            arrays.append(array)
    return arrays


def _bytes(array, rows=None):
    """Each of the first axis's entries (or ``rows`` of the reshaped array) as a row of bytes."""
    rows = len(array) if rows is None else rows
    return np.ascontiguousarray(array).reshape(rows, -1).view(np.uint8)


def _sequence_candidates(arrays, target_shape):
    """``[(kind, groups)]`` from the coarsest context to the finest, for targets ``(N, T)``
    over inputs laid out ``(N, T, ...)`` (token ids, their mask); inputs of another layout go
    whole into every context."""
    if len(target_shape) != 2:
        return []
    size, length = target_shape
    laid_out = [a for a in arrays if a.ndim >= 2 and a.shape[1] == length]
    others = [_bytes(a) for a in arrays if not (a.ndim >= 2 and a.shape[1] == length)]
    if not laid_out:
        return []
    rest = _ids(np.concatenate(others, axis=1)) if others else np.zeros(size, np.int64)
    token = _ids(np.concatenate([_bytes(a, size * length) for a in laid_out], axis=1))
    token = token.reshape(size, length)
    prefix = np.empty((size, length), dtype=np.int64)
    previous = np.full(size, -1, dtype=np.int64)
    for t in range(length):           # the tokens up to t: (the prefix before, token t)
        previous = _ids(np.stack([previous, token[:, t]], axis=1)) + t * size
        prefix[:, t] = previous
    position = np.broadcast_to(np.arange(length), (size, length)).ravel()
    rest = np.repeat(rest, length)
    return [("the same token", _ids(np.stack([rest, token.ravel()], 1))),
            ("the same token at the same position",
             _ids(np.stack([rest, position, token.ravel()], 1))),
            ("the same preceding tokens", _ids(np.stack([rest, prefix.ravel()], 1)))]


def _ids(rows):
    """Equal rows of a 2-D array, numbered: the same id for the same row."""
    rows = np.ascontiguousarray(rows)
    if rows.shape[1] == 0:
        return np.zeros(len(rows), dtype=np.int64)
    return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _contradicted(groups, targets, valid):
    """``(positions, total)``: scored positions in a group with more than one distinct target,
    and all scored positions; None when there are none of the first."""
    groups = np.asarray(groups).reshape(targets.shape)
    flat, labels = groups[valid], targets[valid]
    if not flat.size:
        return None
    pairs = np.unique(np.stack([flat, labels], axis=1), axis=0)
    kinds = np.bincount(pairs[:, 0], minlength=int(flat.max()) + 1)
    positions = int(np.sum(kinds[flat] > 1))
    return (positions, int(flat.size)) if positions else None


# ----------------------------------------------------------------- the model's view
def _eval_logits(backend, batch, targets):
    """The logits of one forward in eval mode, without a graph, as ``targets.shape +
    (classes,)``; the RNG states and every module's mode put back. None when the forward
    raises or no logits of that layout come out."""
    rng = backend.rng_state()
    try:
        with eval_mode(backend), backend.no_grad():
            output = batch.forward(backend.model)
        key = T.logits_key(backend, batch, output)
        logits = T.logits_array(backend, output, key)
    except Exception:  # the user's forward here: no evidence of what it can see
        return None
    finally:
        backend.set_rng_state(rng)
    axis = T.class_axis_of(logits, targets)
    if axis is None:
        return None
    return np.moveaxis(logits.astype(np.float64), axis, -1)


def _outputs_follow(logits, groups):
    """The model's outputs are the same wherever the context is, and vary between contexts:
    it sees no more than the context (and does see the input)."""
    flat = logits.reshape(-1, logits.shape[-1])
    keys = np.asarray(groups).reshape(-1)
    largest = float(np.max(np.abs(flat))) if flat.size else 0.0
    if not np.isfinite(largest) or largest == 0.0:
        return False
    count = int(keys.max()) + 1
    sums = np.zeros((count, flat.shape[1]))
    np.add.at(sums, keys, flat)
    means = sums / np.bincount(keys, minlength=count)[:, None]
    within = float(np.max(np.abs(flat - means[keys])))
    varied = float(np.max(np.abs(flat - flat.mean(axis=0))))
    return within <= SAME_OUTPUT * largest and varied > VARIED_OUTPUT * largest


@contextlib.contextmanager
def eval_mode(backend):
    """Every module in eval mode for the block, then each back in its own mode."""
    modes = {name: module.training for name, module in backend.named_modules()}
    backend.model.eval()
    try:
        yield
    finally:
        for name, module in backend.named_modules():
            module.training = modes[name]
