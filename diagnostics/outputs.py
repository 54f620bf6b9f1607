"""Which part of a model's output is the logits: one documented rule for every diagnostic.

Models return a tensor, a tuple or a list, a dict (Hugging Face's ``ModelOutput`` is one), a
dataclass or a namedtuple. The rule, first match wins:

1. ``output=`` names the logits: a key or attribute name (str), a position (int), or a
   callable ``output -> tensor``.
2. A tensor is the logits.
3. The entry named ``logits`` (a dict key, a dataclass or namedtuple field, or an attribute
   of any other object).
4. When the loss function is known (the tools have one): the one floating tensor entry the
   loss reads. Each entry is replaced by a fresh leaf, the loss runs once, and the entry
   whose leaf receives a gradient is the logits. (The Monitor has the loss tensor instead:
   it follows the loss's graph back to the entries it reaches first.)
5. The first floating tensor entry (torch's convention: ``nn.LSTM``, ``nn.MultiheadAttention``
   and Hugging Face's tuples put the main output first).

Rules 3 to 5 read only entries that can be a prediction per example: a 0-d tensor never is.
A model that computes its loss inside ``forward`` (``labels=``, the Hugging Face convention)
returns it beside the logits, ``(loss, logits)`` or ``.loss``; the user's ``loss_fn`` that
reads it out is the authority on the loss, and the logits are the other entry.

Only the top level of the output is searched. The logits only serve the statistics that need
class scores (accuracy, label layout, chance level); the loss always gets the whole output, as
the user's training loop gives it.
"""
import copy
import dataclasses
from collections.abc import Mapping

import numpy as np

from .errors import DiagnosticsError

LOGITS = "logits"


def entries(output):
    """``[(key, value)]`` of the top level of ``output``; ``[(None, output)]`` for anything that
    is not a container (a tensor)."""
    if isinstance(output, Mapping):
        return list(output.items())
    if dataclasses.is_dataclass(output) and not isinstance(output, type):
        return [(f.name, getattr(output, f.name)) for f in dataclasses.fields(output)]
    if isinstance(output, tuple) and hasattr(output, "_fields"):
        return list(zip(output._fields, output))
    if isinstance(output, (tuple, list)):
        return list(enumerate(output))
    return [(None, output)]


def check_selector(selector):
    """A ``DiagnosticsError`` naming ``output`` unless ``selector`` is None, a str, an int or a
    callable."""
    ok = (selector is None or isinstance(selector, str) or callable(selector)
          or (isinstance(selector, (int, np.integer)) and not isinstance(selector, bool)))
    if not ok:
        raise DiagnosticsError(f"output: expected None, a key or attribute name (str), a "
                               f"position (int) or a callable output -> tensor, got "
                               f"{type(selector).__name__}")
    return selector


def select_key(backend, output, *, selector=None, reads=None):
    """The key of the logits in ``output`` by the rule above (None: ``output`` itself is the
    tensor); ``reads()`` returns the keys the loss reads (rule 4), called only when needed.
    A ``DiagnosticsError`` naming ``output`` when ``selector`` names nothing there; a
    ``LookupError`` when no floating tensor is found."""
    if callable(selector):
        return selector
    items = entries(output)
    if selector is not None:
        keys = [key for key, _ in items]
        if isinstance(selector, str) and selector not in keys and hasattr(output, selector):
            return selector
        if selector not in keys and not (isinstance(selector, (int, np.integer))
                                         and isinstance(output, (tuple, list))
                                         and -len(output) <= selector < len(output)):
            raise DiagnosticsError(f"output: expected a key, field or position of the model's "
                                   f"output ({describe(backend, output)}), got {selector!r}")
        return selector
    if items == [(None, output)]:
        if backend.is_tensor(output):
            return None
        if _prediction(backend, getattr(output, LOGITS, None)):
            return LOGITS
        raise LookupError(f"the model returned {type(output).__name__}, not a tensor")
    floating = [key for key, value in items if _prediction(backend, value)]
    if LOGITS in floating:
        return LOGITS
    if len(floating) > 1 and reads is not None:
        read = [key for key in (reads() or ()) if key in floating]
        if len(read) == 1:
            return read[0]
    if floating:
        return floating[0]
    raise LookupError(f"no floating tensor in the model's output ({describe(backend, output)})")


def pick(output, key):
    """The entry ``key`` (from ``select_key``) of ``output``."""
    if key is None:
        return output
    if callable(key):
        return key(output)
    if isinstance(output, Mapping):
        return output[key]
    if isinstance(key, str):
        return getattr(output, key)
    return output[key]


def replace(output, key, value):
    """``output`` with the entry ``key`` replaced by ``value`` (a new container; the old one is
    not changed)."""
    if key is None:
        return value
    if callable(key):
        raise DiagnosticsError("output: a callable selector cannot say where to put a "
                               "replacement; name the logits by key or position")
    if isinstance(output, Mapping):
        new = copy.copy(output)
        new[key] = value
        return new
    if isinstance(output, tuple) and hasattr(output, "_replace"):
        return output._replace(**{key if isinstance(key, str) else output._fields[key]: value})
    if isinstance(output, (tuple, list)):
        items = list(output)
        items[key] = value
        return type(output)(items) if type(output) in (tuple, list) else items
    new = copy.copy(output)
    object.__setattr__(new, key, value)
    return new


def constant(backend, output):
    """``output`` with each top-level tensor entry replaced by a copy outside any graph: a
    probe's backward must not run through (and free) the model's graph."""
    probe = output
    for key, value in entries(output):
        if backend.is_tensor(value):
            probe = replace(probe, key, backend.from_numpy(backend.to_numpy(value), like=value))
    return probe


def loss_gradient(backend, loss_fn, output, key, values, targets):
    """The gradient of ``loss_fn`` on the entry at ``key`` of ``output``, set to ``values`` (an
    ndarray) while the other entries stay constant: an ndarray, or None when the loss does not
    reach it (a loss the model computed inside forward, which ``loss_fn`` only reads out).
    The user's loss, not a convention, says how the entry meets the targets."""
    leaf = backend.from_numpy(values, like=next((p for _, p in backend.named_parameters()),
                                                None))
    leaf.requires_grad_(True)
    with backend.enable_grad():
        loss = loss_fn(replace(constant(backend, output), key, leaf), targets)
        if not getattr(loss, "requires_grad", False):
            return None   # the loss does not read the entry (computed inside forward)
        backend.backward(loss)
    return None if leaf.grad is None else backend.to_numpy(leaf.grad)


def model_loss_gradient(backend, batch, key):
    """``(gradient of the model's own loss on its logits as an ndarray, None)``, or ``(None,
    why not)``, for a ``batch`` (``diagnostics.batch.Batch``) whose ``loss_fn`` reads a loss
    the model computed inside forward (``loss_gradient`` gives None there): one fresh forward,
    the user's ``loss_fn`` reading that loss out, and autograd from it to the logits alone
    (no parameter's ``.grad`` is touched)."""
    if backend.name != "torch":
        return None, ("loss_fn does not read the logits (a loss computed inside forward), and "
                      "reading the model's own loss on them needs torch's autograd")
    torch = backend.torch
    with backend.enable_grad():
        fresh = batch.forward(backend.model)
        logits = pick(fresh, key)
        loss = batch.loss(fresh)
        if not (isinstance(loss, torch.Tensor) and loss.requires_grad and loss.numel() == 1
                and isinstance(logits, torch.Tensor) and logits.requires_grad):
            return None, ("loss_fn's loss has no gradient path to the logits (is the loss "
                          "computed from them, and are labels= passed to the model?)")
        (grad,) = torch.autograd.grad(loss, logits, allow_unused=True)
    if grad is None:
        return None, "the model's loss does not depend on its logits: nothing to read"
    return grad.detach().to("cpu", torch.float64).numpy(), None


def loss_reads(backend, loss_fn, output, targets):
    """The keys of the floating tensor entries that ``loss_fn`` reads (None when it cannot run
    on leaves): each entry becomes a detached leaf, and the loss's backward says which ones it
    reached."""
    leaves = {}
    probe = output
    for key, value in entries(output):
        if _floating(backend, value):
            leaves[key] = backend.from_numpy(backend.to_numpy(value), like=value)
            leaves[key].requires_grad_(True)
            probe = replace(probe, key, leaves[key])
    try:
        backend.backward(loss_fn(probe, targets))
    except Exception:  # the loss cannot take the probe: rule 4 does not apply
        return None
    return [key for key, leaf in leaves.items()
            if leaf.grad is not None and np.any(backend.to_numpy(leaf.grad))]


def describe(backend, output):
    """``tensor (8, 10) float32``, or ``dict: logits (8, 10), loss ()``: what forward returned."""
    if backend.is_tensor(output):
        return f"{tuple(output.shape)} {_dtype(output)}"
    parts = []
    for key, value in entries(output):
        name = f"[{key}]" if isinstance(key, int) else key
        shown = tuple(value.shape) if backend.is_tensor(value) else type(value).__name__
        parts.append(f"{name} {shown}")
    return f"{type(output).__name__}: " + ", ".join(parts)


def _prediction(backend, value):
    """A floating tensor with at least one axis: what can hold a prediction per example (a
    0-d tensor is a loss or a statistic, never the logits)."""
    return _floating(backend, value) and len(tuple(value.shape)) > 0


def _floating(backend, value):
    if not backend.is_tensor(value):
        return False
    flag = getattr(value.dtype, "is_floating_point", None)
    return bool(flag) if flag is not None else np.dtype(value.dtype).kind == "f"


def _dtype(tensor):
    return str(tensor.dtype).replace("torch.", "")
