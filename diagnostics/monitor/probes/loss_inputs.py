"""What reaches a loss that expects logits or log-probabilities: the values themselves.

``binary_cross_entropy_with_logits`` applies its own sigmoid; ``kl_div``, ``nll_loss`` and
``ctc_loss`` take log-probabilities. Given probabilities instead (a sigmoid or softmax at the
end of the model, whatever clamp or scaling follows it), or raw scores (the ``log_softmax``
forgotten), nothing fails. The autograd graph cannot tell it once a clamp sits between the
squashing and the loss; the values can: log-probabilities are never positive and each row of
them, exponentiated, sums to 1 along the class axis (its log-sum-exp is 0), and the logits of a
model trained with BCE turn negative for its negatives.

While a Monitor with a torch model is open, those functions of ``torch.nn.functional`` (which
``nn.BCEWithLogitsLoss``, ``nn.KLDivLoss``, ``nn.NLLLoss`` and ``nn.CTCLoss`` call) are
wrapped; on a sampled iteration the wrapper queues the input's smallest and largest entry, for
the log-probability losses the share of rows whose log-sum-exp along the class axis is off 0 by
more than ``LSE_TOLERANCE``, and the loss's value, on the step's one transfer. The patch is
the one every loss-reading probe shares (``probes/loss_calls.py``); a loss function imported by
name before the Monitor was made is not seen.
"""
from collections import deque
from dataclasses import dataclass

from .base import Probe, Signal, floating
from .loss_calls import LOSS_CALLS, argument

EXPECTS = {"binary_cross_entropy_with_logits": "logits", "kl_div": "log-probabilities",
           "nll_loss": "log-probabilities", "ctc_loss": "log-probabilities"}
# the class axis of each log-probability loss's input, as the loss reads it: NLL's dim 1 (dim 0
# unbatched), CTC's last (T, N, C); KL-divergence does not say: normalised along either of
# dim 1 and the last counts
_CLASS_AXES = {"nll_loss": lambda dims: (1,) if dims >= 2 else (0,),
               "ctc_loss": lambda dims: (dims - 1,),
               "kl_div": lambda dims: tuple(sorted({1, dims - 1})) if dims >= 2 else (0,)}
_INPUT_NAMES = {"ctc_loss": "log_probs"}
LSE_TOLERANCE = 0.1    # rows whose probabilities sum to 1 within about 10% (a clamp's eps,
                       # label smoothing and float rounding stay far inside it)


@dataclass(frozen=True)
class LossInputRecord:
    """One sampled step's input to one of the watched losses."""

    step: int
    function: str
    smallest: float
    largest: float
    shape: tuple[int, ...]
    unnormalised: float | None = None   # log-probability losses: the share of rows whose
                                        # log-sum-exp is off 0 (along the best class axis)
    loss: float | None = None           # the loss's value, where it is one number


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
            tensor = argument(args, kwargs, 0, _INPUT_NAMES.get(function, "input"))
            if tensor is not None and hasattr(tensor, "detach"):
                self.note(function, tensor, result)

    def note(self, function, tensor, result=None):
        """A watched loss got ``tensor`` as its input."""
        try:
            ctx = self.ctx
            if (ctx.sample is None or function in self._seen or not floating(tensor)
                    or tensor.numel() == 0):
                return
            self._seen.add(function)
            values = tensor.detach()
            tensors = [values.amin().float(), values.amax().float()]
            if function in _CLASS_AXES and values.dim() >= 1:
                tensors.append(_unnormalised_share(values, _CLASS_AXES[function](values.dim())))
                loss = getattr(result, "detach", None)
                if loss is not None and result.numel() == 1 and floating(result):
                    tensors.append(result.detach().float().reshape(()))
            self._pending.append((function, tuple(values.shape), tuple(tensors)))
        except Exception as error:     # noqa: BLE001 - never into the user's loss call
            self._error = self._error or error

    def contribute(self):
        if self._error is not None:
            raise self._error
        pending, self._pending = self._pending, []
        step = self.ctx.step
        for function, shape, tensors in pending:
            def receive(values, function=function, shape=shape):
                extra = [float(v) for v in values[2:]] + [None, None]
                self._records.append(LossInputRecord(step, function, float(values[0]),
                                                     float(values[1]), shape, *extra[:2]))
            self.ctx.collector.add(tensors, receive)

    def signals(self):
        return (LossInputs(tuple(self._records)),)

    def close(self):
        self._pending = []
        if self._listening:
            self._listening = False
            LOSS_CALLS.unlisten(self)


def _unnormalised_share(values, axes):
    """The share of rows whose log-sum-exp along the class axis is off 0 by more than
    ``LSE_TOLERANCE``, for the axis of ``axes`` where the share is least (a device scalar)."""
    wide = values if values.element_size() >= 4 else values.float()   # half: in float32
    shares = [(wide.logsumexp(axis).abs() > LSE_TOLERANCE).float().mean() for axis in axes]
    return shares[0] if len(shares) == 1 else shares[0].minimum(shares[1])
