"""``GradhuntTrainerCallback``: a Monitor on a ``transformers.Trainer`` run, no loop edits.

Needs the ``transformers`` extra; imported only when the callback is used.
"""
from transformers import TrainerCallback

from ..backends.hooks import NotCopied
from ..monitor.settings import DEFAULT_EVERY
from .attached import (SEVERITY_LEVELS, AttachedMonitor, checked_guard, checked_options,
                       log_finding)


class GradhuntTrainerCallback(TrainerCallback):
    """Watch ``transformers.Trainer.train()`` with a gradhunt ``Monitor``.

    At train begin a Monitor is attached to the model and the Trainer's optimizer, and a
    forward hook reads the loss the model returns (``outputs.loss``, as the Trainer's own
    ``compute_loss`` does; a model that returns no loss gives the Monitor no iterations). The
    Monitor takes one iteration per optimizer step (``on_step_end``, after the Trainer's
    clipping, step and ``zero_grad``) with the mean loss of that step's micro-batches, so
    ``gradient_accumulation_steps`` and mixed precision (the model's loss is read before any
    scaling) look like any healthy loop. Each new finding is appended to
    ``state.log_history`` as ``{"gradhunt/<CODE>": 1 info, 2 warning, 3 error, "step": ...}``
    (callbacks cannot reach the Trainer's reporting integrations) and goes to the ``gradhunt``
    Python logger; the report is printed at train end.

    ``transformers`` has no event for an exception inside ``train()``: to have the hooks
    removed then too, use the callback as a context manager around ``train()`` (or call
    ``close()``); otherwise they are removed at train end and at the next train begin.

    Args:
        every: sample every ``every``-th optimizer step (the Monitor's ``every``).
        sinks: Monitor sinks (``CSVSink``, ``JSONLSink``, ...) for the per-step statistics.
        print_report: print the Monitor's report at train end (on the main process).

    Raises:
        DiagnosticsError: for a bad argument, when the callback is built.

    Example::

        with GradhuntTrainerCallback() as watch:
            Trainer(model=model, args=args, train_dataset=data, callbacks=[watch]).train()
        watch.report.findings
    """

    def __init__(self, *, every=DEFAULT_EVERY, sinks=(), print_report=True, guard=None):
        self.every, self.sinks, self.print_report = checked_options(every, sinks, print_report)
        self.guard = checked_guard(guard)   # Monitor(guard=...): "skip", "stop" or None
        self.failure = None       # why the Monitor stopped early, if it did
        self.report = None        # the MonitorReport, once training has ended
        self._attached = self._loss_hook = self._state = None

    @property
    def findings(self):
        """Findings so far (during training) or of the last run."""
        if self._attached is not None:
            return self._attached.monitor.findings
        return self.report.findings if self.report is not None else []

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        self.close()
        self._state, self.report, self.failure = state, None, None
        self._attached = AttachedMonitor(model, optimizer, every=self.every, sinks=self.sinks,
                                         on_finding=self._on_finding, guard=self.guard)
        self._loss_hook = model.register_forward_hook(NotCopied(self._on_model_output))

    def on_step_end(self, args, state, control, **kwargs):
        if self._attached is not None:
            self._attached.step()

    def on_train_end(self, args, state, control, **kwargs):
        if self._attached is None:
            return
        attached = self._attached
        self.report, self.failure = attached.report(), attached.failure
        self.close()
        if self.print_report and state.is_world_process_zero:
            print(attached.report_text(self.report))

    def close(self):
        """Remove the loss hook and close the Monitor; idempotent."""
        hook, attached = self._loss_hook, self._attached
        self._loss_hook = self._attached = None
        try:
            if hook is not None:
                hook.remove()
        finally:
            if attached is not None:
                if self.report is None:
                    self.report, self.failure = attached.report(), attached.failure
                attached.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _on_model_output(self, module, args, output):
        import torch

        if not (module.training and torch.is_grad_enabled()):
            return
        loss = output.get("loss") if hasattr(output, "get") else getattr(output, "loss", None)
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            self._attached.add_loss(loss)

    def _on_finding(self, finding):
        state = self._state
        state.log_history.append({f"gradhunt/{finding.code}": SEVERITY_LEVELS[finding.severity],
                                  "step": state.global_step})
        if state.is_world_process_zero:
            log_finding(finding, "Trainer")
