"""``GradhuntCallback``: a Monitor on a Lightning run, with no change to the LightningModule.

Needs the ``lightning`` extra (``lightning.pytorch``); imported only when the callback is used.
"""
from lightning.pytorch.callbacks import Callback

from ..monitor.settings import DEFAULT_EVERY
from .attached import (SEVERITY_LEVELS, AttachedMonitor, checked_guard, checked_options,
                       log_finding)


class GradhuntCallback(Callback):
    """Watch a ``lightning.pytorch.Trainer`` fit with a gradhunt ``Monitor``.

    At fit start a Monitor is attached to the LightningModule and its optimizer (with several
    optimizers, to the module alone). It takes one iteration per optimizer step: with
    ``accumulate_grad_batches=k`` the losses of the k micro-batches are averaged (undoing
    Lightning's division by k), so the trainer's own ``zero_grad``, gradient clipping and AMP
    (the loss is read before the scaler multiplies it) look like any healthy loop. Each new
    finding goes to every logger of the trainer as the metric ``gradhunt/<CODE>`` (1 info,
    2 warning, 3 error) and to the ``gradhunt`` Python logger; the report is printed when fit
    ends. The Monitor is closed at the end of fit, on an exception and at teardown.

    With automatic optimization and no GradScaler, the Monitor gets the loss that backward ran
    on (``on_before_backward``), graph and all, so the signals read from the loss's graph
    (layers kept in a plain list, a softmax fed to cross-entropy, whether the loss scores
    classes at all) work as in a plain loop; under a GradScaler that loss is scaled, and the
    one ``training_step`` returned is used, detached.

    Args:
        every: sample every ``every``-th optimizer step (the Monitor's ``every``).
        sinks: Monitor sinks (``CSVSink``, ``JSONLSink``, ...) for the per-step statistics.
        print_report: print the Monitor's report at the end of fit (on global rank 0).

    Raises:
        DiagnosticsError: for a bad argument, when the callback is built.

    Example::

        trainer = Trainer(max_epochs=3, callbacks=[GradhuntCallback()])
        trainer.fit(module, datamodule)
        module_report = trainer.callbacks[0].report
    """

    def __init__(self, *, every=DEFAULT_EVERY, sinks=(), print_report=True, guard=None):
        self.every, self.sinks, self.print_report = checked_options(every, sinks, print_report)
        self.guard = checked_guard(guard)   # Monitor(guard=...): "skip", "stop" or None
        self.failure = None       # why the Monitor stopped early, if it did
        self.report = None        # the MonitorReport, once fit has ended
        self._attached = None
        self._trainer = None
        self._last_step = 0
        self._live = None         # the loss backward ran on in this batch, with its graph

    @property
    def findings(self):
        """Findings so far (during fit) or of the last fit."""
        if self._attached is not None:
            return self._attached.monitor.findings
        return self.report.findings if self.report is not None else []

    def on_fit_start(self, trainer, pl_module):
        self._close()
        optimizers = trainer.optimizers
        self._trainer, self._last_step = trainer, trainer.global_step
        self.report = self.failure = None
        self._attached = AttachedMonitor(
            pl_module, optimizers[0] if len(optimizers) == 1 else None, every=self.every,
            sinks=self.sinks, on_finding=self._on_finding, guard=self.guard)

    def on_before_backward(self, trainer, pl_module, loss):
        if (self._attached is not None and pl_module.automatic_optimization
                and getattr(trainer.precision_plugin, "scaler", None) is None):
            self._live = _loss_of(loss)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self._attached is None:
            return
        live, self._live = self._live, None
        loss = live if live is not None else _loss_of(outputs)
        if loss is not None:
            if pl_module.automatic_optimization:     # Lightning divided it by k for backward
                loss = loss * trainer.accumulate_grad_batches
            self._attached.add_loss(loss, graph=live is not None)
        if trainer.global_step > self._last_step:    # the optimizer stepped on this batch
            self._last_step = trainer.global_step
            self._attached.step()

    def on_fit_end(self, trainer, pl_module):
        if self._attached is None:
            return
        attached = self._attached
        self.report, self.failure = attached.report(), attached.failure
        self._close()
        if self.print_report and trainer.is_global_zero:
            print(attached.report_text(self.report))

    def on_exception(self, trainer, pl_module, exception):
        self._close()

    def teardown(self, trainer, pl_module, stage):
        self._close()

    def _close(self):
        self._live = None
        attached, self._attached = self._attached, None
        if attached is not None:
            if self.report is None:
                self.report, self.failure = attached.report(), attached.failure
            attached.close()

    def _on_finding(self, finding):
        trainer = self._trainer
        for logger in trainer.loggers:
            logger.log_metrics({f"gradhunt/{finding.code}": SEVERITY_LEVELS[finding.severity]},
                               step=trainer.global_step)
        if trainer.is_global_zero:
            log_finding(finding, "Lightning")


def _loss_of(outputs):
    """The training loss in what ``training_step`` returned (a tensor or a dict's ``"loss"``),
    or the loss backward runs on: a one-element tensor, else None."""
    import torch

    loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
    return loss if isinstance(loss, torch.Tensor) and loss.numel() == 1 else None
