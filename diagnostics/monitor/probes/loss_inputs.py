"""What reaches a loss that expects logits or log-probabilities: the values themselves.

``binary_cross_entropy_with_logits`` applies its own sigmoid; ``kl_div`` and ``nll_loss``
take log-probabilities. Given probabilities instead (a sigmoid or softmax at the end of the
model, whatever clamp or scaling follows it), nothing fails. The autograd graph cannot tell it
once a clamp sits between the squashing and the loss; the values can: log-probabilities are
never positive, and the logits of a model trained with BCE turn negative for its negatives.

While a Monitor with a torch model is open, those three functions of ``torch.nn.functional``
(which ``nn.BCEWithLogitsLoss``, ``nn.KLDivLoss`` and ``nn.NLLLoss`` call) are wrapped; on a
sampled iteration the wrapper queues the input's smallest and largest entry on the step's
one transfer. The patch is the one every loss-reading probe shares (``probes/loss_calls.py``);
a loss function imported by name before the Monitor was made is not seen.
"""
from collections import deque
from dataclasses import dataclass

from .base import Probe, Signal, floating
from .loss_calls import LOSS_CALLS, argument

EXPECTS = {"binary_cross_entropy_with_logits": "logits", "kl_div": "log-probabilities",
           "nll_loss": "log-probabilities"}


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
            LOSS_CALLS.listen(self)
            self._listening = True

    def loss_called(self, function, args, kwargs, result):
        """A loss function was called (told by the shared patch)."""
        if function in EXPECTS:
            tensor = argument(args, kwargs, 0, "input")
            if tensor is not None and hasattr(tensor, "detach"):
                self.note(function, tensor)

    def note(self, function, tensor):
        """A watched loss got ``tensor`` as its input."""
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
            LOSS_CALLS.unlisten(self)
