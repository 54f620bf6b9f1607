"""What reaches a loss that expects logits or log-probabilities: the values themselves.

``binary_cross_entropy_with_logits`` applies its own sigmoid; ``kl_div`` and ``nll_loss``
take log-probabilities. Given probabilities instead (a sigmoid or softmax at the end of the
model, whatever clamp or scaling follows it), nothing fails. The autograd graph cannot tell it
once a clamp sits between the squashing and the loss; the values can: log-probabilities are
never positive, and the logits of a model trained with BCE turn negative for its negatives.

While a Monitor with a torch model is open, those three functions of ``torch.nn.functional``
(which ``nn.BCEWithLogitsLoss``, ``nn.KLDivLoss`` and ``nn.NLLLoss`` call) are wrapped; on a
sampled iteration the wrapper queues the input's smallest and largest entry on the step's
one transfer, then calls the original. One patch serves every open Monitor (``SharedPatch``);
a loss function imported by name before the Monitor was made is not seen.
"""
import functools
from collections import deque
from dataclasses import dataclass

from .base import Probe, Signal, floating
from .shared_patch import SharedPatch, restore_attributes

EXPECTS = {"binary_cross_entropy_with_logits": "logits", "kl_div": "log-probabilities",
           "nll_loss": "log-probabilities"}

_LISTENERS = []
_INSTALLED = []      # (owner, name, original, wrapper)


@dataclass(frozen=True)
class LossInputRecord:
    """One sampled step's input to one of the watched losses."""

    step: int
    function: str
    smallest: float
    largest: float
    shape: tuple[int, ...]


@dataclass(frozen=True)
class LossInputs(Signal):
    """The window's records of what reached the watched losses."""

    records: tuple[LossInputRecord, ...]


class LossInputsProbe(Probe):

    publishes = (LossInputs,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._records = deque(maxlen=4 * ctx.window)
        self._pending = []         # (function, shape, tensors) of this sampled iteration
        self._seen = set()         # functions noted in this sampled iteration
        self._listening = False
        self._error = None

    def begin(self):
        self._pending, self._seen = [], set()
        if self.ctx.backend.name == "torch" and not self._listening:
            _PATCH.listen(self)
            self._listening = True

    def note(self, function, tensor):
        """A watched loss is called (told by the patch, before the original runs)."""
        try:
            ctx = self.ctx
            if (ctx.sample is None or function in self._seen or not floating(tensor)
                    or tensor.numel() == 0):
                return
            self._seen.add(function)
            values = tensor.detach()
            self._pending.append((function, tuple(values.shape),
                                  (values.amin().float(), values.amax().float())))
        except Exception as error:     # noqa: BLE001 - never into the user's loss call
            self._error = self._error or error

    def contribute(self):
        if self._error is not None:
            raise self._error
        pending, self._pending = self._pending, []
        step = self.ctx.step
        for function, shape, tensors in pending:
            def receive(values, function=function, shape=shape):
                self._records.append(LossInputRecord(step, function, float(values[0]),
                                                     float(values[1]), shape))
            self.ctx.collector.add(tensors, receive)

    def signals(self):
        return (LossInputs(tuple(self._records)),)

    def close(self):
        self._pending = []
        if self._listening:
            self._listening = False
            _PATCH.unlisten(self)


def _install():
    import torch.nn.functional as F

    try:
        for name in EXPECTS:
            original = getattr(F, name, None)
            if callable(original):
                wrapper = _wrap(name, original)
                setattr(F, name, wrapper)
                _INSTALLED.append((F, name, original, wrapper))
    except BaseException:
        _uninstall()
        raise


def _uninstall():
    restore_attributes(_INSTALLED)


def _wrap(function, original):
    @functools.wraps(original)
    def loss(*args, **kwargs):
        if _LISTENERS:
            tensor = args[0] if args else kwargs.get("input")
            if tensor is not None and hasattr(tensor, "detach"):
                for listener in tuple(_LISTENERS):
                    listener.note(function, tensor)
        return original(*args, **kwargs)
    return loss


_PATCH = SharedPatch(_LISTENERS, install=_install, uninstall=_uninstall)
