"""``Run``: what every item's check reads — the backend, the batch, the options, the facts found
so far — and the one snapshot preflight goes back to after each item."""
from __future__ import annotations

from .._training import NO_LOGITS
from .facts import Facts


class Run:
    """The items' shared context. ``facts`` is replaced by the runner alone, with the facts an
    item's ``Outcome`` returns; an item reads it and never assigns it."""

    def __init__(self, backend, batch, *, optimizer, train_step, causal: bool, data=None,
                 test_data=None, pad_value=None):
        self.backend, self.batch, self.pad_value = backend, batch, pad_value
        self.optimizer, self.train_step, self.causal = optimizer, train_step, causal
        self.data, self.test_data = data, test_data
        self.facts = Facts()
        self._state = backend.snapshot()     # the one snapshot: restored after each item
        self._optimizer_state = (None if optimizer is None
                                 else backend.optimizer_snapshot(optimizer))
        self._extra_state = []   # (tensor, saved) for the optimizer's tensors outside the model
        self._loss_call = None

    def keep_tensors(self, tensors) -> None:
        """Also put these tensors (the optimizer's, outside the model) back after each item."""
        self._extra_state = [(tensor, self.backend.snapshot_tensor(tensor))
                             for tensor in tensors]

    def restore(self) -> None:
        """The model and the optimizer back as preflight found them."""
        self.backend.restore(self._state)
        if self.optimizer is not None:
            self.backend.optimizer_restore(self.optimizer, self._optimizer_state)
        for tensor, saved in self._extra_state:
            self.backend.restore_tensor(tensor, saved)

    def loss_call(self):
        """``(loss value, None)`` or ``(None, exception)`` of the loss at init, computed once."""
        if self._loss_call is None:
            try:
                with self.backend.no_grad():
                    _, loss = self.batch.output_and_loss(self.backend)
                self._loss_call = (self.backend.scalar(loss), None)
            except Exception as error:  # the user's loss: its items report it
                self._loss_call = (None, error)
        return self._loss_call

    def logits_key(self):
        """Where the logits are in the output, or ``NO_LOGITS`` when none were found."""
        logits = self.facts.logits
        return NO_LOGITS if logits is None else logits.key
