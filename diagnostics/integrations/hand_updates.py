"""Loops without an optimizer: a model whose parameters the script changes in place after a
backward (``p.data.add_(p.grad, alpha=-lr)``, ``with torch.no_grad(): p -= lr * p.grad``, as
pytorch/examples' word_language_model does).

No optimizer step marks the end of such an iteration; the next call of the model does. A
top-level model called again after a backward that reached its parameters, with parameters
that changed since that backward, ended an iteration by hand. A backward that only
accumulates (micro-batches before an optimizer's step) leaves the parameters as they were and
ends nothing; a model an optimizer holds parameters of is the optimizer's to watch.

Whether the parameters changed is read on a few entries of a few of them, copied right after
the backward (``.data`` writes do not move a tensor's version counter, so versions cannot
tell). Whether the backward reached them is read on their ``.grad`` (another tensor, or the
same one at another version). Python-side work per backward, a few tiny copies.
"""
import weakref
from dataclasses import dataclass

PARAMETERS = 16   # parameters fingerprinted per model, spread over the model
ENTRIES = 8       # entries per fingerprinted parameter, spread over the tensor


@dataclass
class _Pending:
    """A model a backward reached: its fingerprinted parameters and their entries then."""

    model: weakref.ref
    parameters: list      # [(parameter, stride)]
    entries: list         # the copies, one per parameter


class HandUpdates:
    """Which top-level models end their iterations by hand, and when.

    ``candidates`` and ``gradients`` before a backward, ``after_backward`` after it;
    ``ended(model)`` at the model's next call says whether an iteration ended there.
    """

    def __init__(self):
        self._pending = {}     # id(model) -> _Pending

    @staticmethod
    def candidates(roots, held):
        """``[(model, trainable parameters)]`` of the top-level models with trainable
        parameters none of which an optimizer seen so far holds (``held``: their ids)."""
        found = []
        for model in roots:
            try:
                params = [p for p in model.parameters() if p.requires_grad]
            except Exception:   # a model that cannot list them: not one to watch by hand
                continue
            if params and not any(id(p) in held for p in params):
                found.append((model, params))
        return found

    @staticmethod
    def gradients(candidates):
        """What each candidate's ``.grad`` tensors are before a backward."""
        return [[_grad_token(p) for p in params] for _, params in candidates]

    def after_backward(self, candidates, before):
        """Fingerprint the candidates the backward just reached (their ``.grad`` moved)."""
        for (model, params), tokens in zip(candidates, before):
            if any(_grad_token(p) != token for p, token in zip(params, tokens)):
                chosen = _spread(params, PARAMETERS)
                strides = [max(1, p.numel() // ENTRIES) for p in chosen]
                self._pending[id(model)] = _Pending(
                    weakref.ref(model), list(zip(chosen, strides)),
                    [_entries(p, s).clone() for p, s in zip(chosen, strides)])

    def ended(self, model):
        """Whether ``model``'s parameters changed since the last backward that reached them
        (then that iteration ended by hand); the fingerprint is used up either way."""
        pending = self._pending.pop(id(model), None)
        if pending is None or pending.model() is not model:
            return False
        return _changed(pending)

    def pending_ended(self):
        """The models whose last iteration ended by hand and was not followed by a call
        (the script's last iteration), each once."""
        pending, self._pending = self._pending, {}
        models = [(p.model(), p) for p in pending.values()]
        return [model for model, p in models if model is not None and _changed(p)]


def _grad_token(param):
    grad = param.grad
    return None if grad is None else (id(grad), grad._version)


def _spread(items, k):
    """At most ``k`` of ``items``, evenly spaced, the last one always among them."""
    if len(items) <= k:
        return list(items)
    step = len(items) / k
    return [items[min(len(items) - 1, int((i + 1) * step) - 1)] for i in range(k)]


def _entries(param, stride):
    return param.detach().reshape(-1)[::stride][:ENTRIES]


def _changed(pending):
    import torch

    return any(not torch.equal(_entries(p, stride), saved)
               for (p, stride), saved in zip(pending.parameters, pending.entries))
