"""The loss of every step: read on the host where it lives there, else at the next transfer."""
import math
import numbers

from ...errors import DiagnosticsError, require
from .base import Probe


class LossProbe(Probe):

    def __init__(self, ctx):
        super().__init__(ctx)
        self._pending = []   # floats, or detached one-element tensors not yet read

    def on_step(self, loss):
        entry = self._entry(loss)
        self._pending.append(entry)
        # a NaN/inf loss read on the host is alerted at once, not at the next sampled step
        return (self.ctx.sample is None and isinstance(entry, float) and not math.isfinite(entry)
                and self.ctx.history.first_nonfinite_step is None)

    def _entry(self, loss):
        """The loss as a float, or, on an accelerator, a detached one-element tensor read at
        the next sampled step's transfer."""
        backend = self.ctx.backend
        if backend.is_tensor(loss):
            if math.prod(loss.shape) != 1:   # (the message is built only when it is needed)
                raise DiagnosticsError(f"loss: expected a one-element tensor (the scalar loss), "
                                       f"got a tensor of shape {tuple(loss.shape)}")
            return backend.scalar(loss) if backend.on_host(loss) else loss.detach()
        require(isinstance(loss, numbers.Real) and not isinstance(loss, bool), "loss",
                f"the loss as a one-element {backend.name} tensor or a number",
                type(loss).__name__)
        return float(loss)

    def contribute(self):
        """One entry for the losses of every step since the last transfer."""
        entries, self._pending = self._pending, []
        if not entries:
            return
        history = self.ctx.history

        def receive(values):
            values = iter(values)
            history.add_losses([entry if isinstance(entry, float) else next(values)
                                for entry in entries])
        self.ctx.collector.add([e for e in entries if not isinstance(e, float)], receive)

    def finish(self, sample):
        sample.loss = float(self.ctx.history.losses[-1])

    def view_fields(self):
        history = self.ctx.history
        return {"losses": history.losses, "first_nonfinite_step": history.first_nonfinite_step,
                "best_loss_level": history.best_level}

    def fill_row(self, row, sample, view):
        row["loss"] = sample.loss
