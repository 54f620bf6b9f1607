"""``Monitor``: watch a training loop through hooks: statistics, loss health and findings."""
import math
import numbers
import weakref
from collections import deque

import numpy as np

from ..backends import get_backend
from ..errors import DiagnosticsError, require
from ..findings import SEVERITIES
from .checks import FULL_CHECK_STEPS, run_checks
from .collector import Collector
from .history import (History, Series, activation_columns, columns_for, gradient_columns,
                      update_column)
from .layout import Layout, learning_rates
from .records import ActivationRecord, GradientRecord, Sample, UpdateRecord
from .report import MonitorReport
from .settings import DEFAULT_EVERY, DEFAULT_WINDOW, Thresholds
from .units import UnitActivity
from .view import WindowView

_KEPT_LOSS_AGE = 2      # a loss tensor still alive this many steps later is being held
_KEPT_LOSS_PROBES = 8   # loss tensors watched at once


class Monitor:
    """Statistics of activations, gradients and updates, loss health, and findings.

    ::

        with Monitor(model, optimizer) as monitor:
            for x, y in batches:
                optimizer.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()
                monitor.step(loss)
        print(monitor.report())

    Statistics are taken on sampled iterations: the first two, then every ``every``-th.
    Hooks are attached only for those; between them one forward pre-hook on the model stays
    (for evaluation passes in training mode and update sizes). Every number is computed on
    the tensor's device and brought to the host in one transfer per sampled step; a loss on
    the CPU is read at its own step (a NaN loss is alerted at once). A sampled iteration reads
    every activation and gradient several times over: on a CPU that costs about as much as a
    training step of a small MLP (``every=1`` runs 1.9x slower, the reductions alone 1.4-1.5x),
    so sample sparsely (the default 50: 1.03-1.05x) unless you are chasing a transient.

    Checks look back over the last ``window`` sampled steps. ``on_finding(finding)`` is called
    once per new finding (and again if its severity rises); ``sinks`` receive one row per
    sampled step.
    The Monitor never changes the model, the optimizer or any random generator; ``close()``
    (or leaving the ``with`` block, also on an exception) removes every hook.
    """

    def __init__(self, model, optimizer=None, *, every=DEFAULT_EVERY, window=DEFAULT_WINDOW,
                 sinks=(), on_finding=None, thresholds=None):
        backend = get_backend(model)
        _require_count(every, "every", 1)
        _require_count(window, "window", 2)
        require(on_finding is None or callable(on_finding), "on_finding",
                "a callable taking a Finding, or None", type(on_finding).__name__)
        require(thresholds is None or isinstance(thresholds, Thresholds), "thresholds",
                "a diagnostics.monitor.Thresholds or None", type(thresholds).__name__)
        sinks = _checked_sinks(sinks)
        self.every, self.window = every, window
        self.thresholds = thresholds or Thresholds()
        self._backend, self._optimizer = backend, optimizer
        self._layout = Layout(backend, optimizer)
        self._history = History(columns_for(self._layout,
                                            learning_rate=bool(learning_rates(optimizer))))
        self._activation_columns = [(layer, activation_columns(layer))
                                    for layer in self._layout.layers]
        self._parameter_columns = [(param, gradient_columns(param), update_column(param))
                                   for param in self._layout.trainable]
        self._collector = Collector(backend)
        self._samples = deque(maxlen=window)
        self._units = UnitActivity(min(window, self.thresholds.dead_samples))
        self._gradient_rows = UnitActivity(min(window, self.thresholds.dead_samples))
        self._per_unit = set(self._layout.unit_weights) | set(self._layout.unit_biases.values())
        self._gradient_norms = Series()
        self._findings = {}
        self._on_finding = on_finding
        self._eval_passes = []    # (step, [modules in train mode]) of the first such pass
        self._eval_pass_count = 0
        self._pending_losses = []
        self._kept_losses = []
        self._watched_losses = deque()
        self._step = 0
        self._last_full_check = None
        self._sample = None
        self._arrivals = {}
        self._weight_copies = {}
        self._pending_updates = []
        self._last_updates = {}
        self._sampled_hooks = []
        self._params_by_name = {p.name: p for p in self._layout.trainable}
        self._closed = False
        self._sinks = ()
        try:
            for sink in sinks:
                sink.open(self._history.columns)
                self._sinks += (sink,)
        except Exception:
            for sink in self._sinks:
                sink.close()
            raise
        self._permanent_hooks = [backend.add_forward_pre_hook(model, self._on_forward_start,
                                                              with_kwargs=True)]
        self._begin_iteration()

    # ------------------------------------------------------------------ public
    def step(self, loss):
        """Record the end of an iteration: call it once per iteration, after
        ``optimizer.step()``, with the loss (a one-element tensor or a number)."""
        require(not self._closed, "Monitor.step", "an open Monitor", "one that was closed")
        entry = self._loss_entry(loss)
        self._pending_losses.append(entry)
        sample = self._sample
        if sample is not None:
            self._watch_loss(loss)
            self._queue_updates()            # an earlier step's, if no forward came since
            self._queue_gradients(sample)    # measured at the next forward, after the optimizer
            self._queue_losses()
            self._collector.flush()
            sample.loss = float(self._history.losses[-1])
            self._finish_sample(sample)
        elif isinstance(entry, float) and not math.isfinite(entry):
            self._alert_nonfinite_loss()
        self._step += 1
        self._begin_iteration()

    def _alert_nonfinite_loss(self):
        """A NaN/inf loss read on the host is reported at once, not at the next sampled step."""
        if self._history.first_nonfinite_step is not None:
            return
        self._queue_losses()
        self._collector.flush()
        self._run_checks(self._view(), urgent_only=True)

    def report(self):
        """A ``MonitorReport``: findings, per-layer and per-parameter statistics, history."""
        if not self._closed:
            self._queue_updates()
        self._queue_losses()
        self._collector.flush()
        view = self._view()
        self._run_checks(view)
        return MonitorReport.build(
            view=view, history=self._history, findings=self.findings,
            backend=self._backend.name, model_type=self._layout.root_type,
            last_updates=dict(self._last_updates))

    @property
    def findings(self):
        """Findings so far, errors first, then in the order they were found."""
        rank = {severity: i for i, severity in enumerate(reversed(SEVERITIES))}
        return sorted(self._findings.values(), key=lambda f: rank[f.severity])

    @property
    def history(self):
        return self._history

    def close(self):
        """Remove every hook and close the sinks; idempotent. ``report()`` still works."""
        if self._closed:
            return
        self._closed = True
        self._sample = None
        self._arrivals, self._pending_updates, self._weight_copies = {}, [], {}
        self._backend.release_scratch()
        try:
            self._remove_sampled_hooks()
            for handle in self._permanent_hooks:
                handle.remove()
            self._permanent_hooks = []
        finally:
            for sink in self._sinks:
                sink.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ------------------------------------------------------------- iterations
    def _is_sampled(self, step):
        return step < 2 or step % self.every == 0

    def _begin_iteration(self):
        """Arm the hooks when the coming iteration is sampled, disarm them when not."""
        self._arrivals = {}
        if not self._is_sampled(self._step):
            self._sample = None
            self._remove_sampled_hooks()
            return
        self._sample = Sample(self._step)
        if not self._sampled_hooks:
            self._add_sampled_hooks()

    def _add_sampled_hooks(self):
        backend, model = self._backend, self._backend.model
        handles = [backend.add_forward_hook(model, self._on_model_output)]
        handles += [backend.add_forward_hook(layer.module, self._layer_hook(layer))
                    for layer in self._layout.layers]
        handles += [backend.add_tensor_hook(param.tensor, self._gradient_hook(param))
                    for param in self._layout.trainable]
        self._sampled_hooks = handles

    def _remove_sampled_hooks(self):
        handles, self._sampled_hooks = self._sampled_hooks, []
        for handle in handles:
            handle.remove()

    # ------------------------------------------------------------------ hooks
    def _on_forward_start(self, module, args, kwargs):
        """Forward pre-hook on the model, always attached; the input is the first tensor
        among the positional, then the keyword arguments (``model(**batch)``)."""
        if self._pending_updates:
            self._queue_updates()
        if not self._backend.grad_enabled():
            self._note_pass_without_gradients()
        elif self._sample is not None:
            tensor = next((a for a in (*args, *kwargs.values()) if self._backend.is_tensor(a)),
                          None)
            if tensor is not None:
                if self._sample.batch is None:
                    self._sample.batch = int(tensor.shape[0]) if len(tensor.shape) else 1
                self._queue_activation(self._sample, None, tensor, None)
        return None

    def _on_model_output(self, module, args, output):
        if self._sample is not None and self._backend.grad_enabled():
            tensor = self._first_tensor(output)
            if tensor is not None and len(tensor.shape) >= 2:
                self._sample.output_width = int(tensor.shape[-1])
                self._queue_output_entropy(self._sample, tensor)
        return None

    def _layer_hook(self, layer):
        def hook(module, args, output):
            if self._sample is not None and self._backend.grad_enabled():
                tensor = self._first_tensor(output)
                if tensor is not None:
                    self._queue_activation(self._sample, layer.name, tensor, layer.saturation)
            return None
        return hook

    def _gradient_hook(self, param):
        def hook(grad):
            if self._sample is not None and param.name not in self._arrivals:
                self._receive_gradient(self._sample, param, grad)
            return None
        return hook

    def _receive_gradient(self, sample, param, grad):
        """First gradient of a sampled iteration: its statistics, what .grad already held, and
        a copy of the weights so that the coming optimizer step can be measured."""
        backend, name, count = self._backend, param.name, param.numel
        copy = backend.weight_sample(param.tensor, into=self._weight_copies.get(name))
        self._weight_copies[name] = self._arrivals[name] = copy

        def receive_incoming(parts):
            sample.gradients[name] = GradientRecord.from_parts(count, parts)

        def receive_previous(parts):
            sample.stale[name] = GradientRecord.from_parts(count, parts)

        self._collector.add(backend.gradient_statistics(grad, per_unit=name in self._per_unit),
                            receive_incoming)
        previous = param.tensor.grad
        if previous is not None:
            self._collector.add(backend.gradient_statistics(previous), receive_previous)

    def _note_pass_without_gradients(self):
        training = [name for name, module in self._layout.mode_modules if module.training]
        if training:
            self._eval_pass_count += 1
            if not self._eval_passes:
                self._eval_passes.append((self._step, training))

    # -------------------------------------------------------------- queueing
    def _queue_activation(self, sample, name, tensor, saturation):
        stats = self._backend.activation_statistics(tensor, saturation=saturation)
        if stats is None:
            return
        count = math.prod(tensor.shape)

        def receive(parts):
            record = ActivationRecord.from_parts(count, parts)
            if name is None:
                sample.inputs = record if sample.inputs is None else sample.inputs.merge(record)
            else:
                sample.add_activation(name, record)
        self._collector.add(stats, receive)

    def _queue_output_entropy(self, sample, tensor):
        """The mean entropy of the output's softmax, when it looks like class scores (a
        floating output of C >= 2 columns): the first model call of the iteration only."""
        if sample.output_entropy is not None:
            return
        entropy = self._backend.prediction_entropy(tensor)
        if entropy is None:
            return
        sample.output_entropy = math.nan   # queued; the transfer fills it in

        def receive(parts):
            sample.output_entropy = float(parts[0])
        self._collector.add((entropy,), receive)

    def _queue_losses(self):
        """One entry for the losses of every step since the last transfer."""
        entries, self._pending_losses = self._pending_losses, []
        if not entries:
            return
        history = self._history

        def receive(values):
            values = iter(values)
            history.add_losses([entry if isinstance(entry, float) else next(values)
                                for entry in entries])
        self._collector.add([e for e in entries if not isinstance(e, float)], receive)

    def _queue_gradients(self, sample):
        """Hand this iteration's weight copies to the update measurement."""
        self._pending_updates += [(sample, self._params_by_name[name], before)
                                  for name, before in self._arrivals.items()]
        self._arrivals = {}

    def _queue_updates(self):
        """Measure |Δw| of the last sampled step: called once the optimizer has stepped."""
        pending, self._pending_updates = self._pending_updates, []
        for sample, param, before in pending:
            self._collector.add(
                self._backend.update_statistics(param.tensor, before),
                lambda parts, sample=sample, name=param.name: self._receive_update(
                    sample, name, parts))

    def _receive_update(self, sample, name, parts):
        record = UpdateRecord(*parts)
        sample.updates[name] = record
        self._last_updates[name] = record

    # ------------------------------------------------------------------ loss
    def _loss_entry(self, loss):
        """The loss as a float, or, on an accelerator, a detached one-element tensor read at
        the next sampled step's transfer."""
        backend = self._backend
        if backend.is_tensor(loss):
            if math.prod(loss.shape) != 1:   # (the message is built only when it is needed)
                raise DiagnosticsError(f"loss: expected a one-element tensor (the scalar loss), "
                                       f"got a tensor of shape {tuple(loss.shape)}")
            return backend.scalar(loss) if backend.on_host(loss) else loss.detach()
        require(isinstance(loss, numbers.Real) and not isinstance(loss, bool), "loss",
                f"the loss as a one-element {backend.name} tensor or a number",
                type(loss).__name__)
        return float(loss)

    def _watch_loss(self, loss):
        """Keep weak references to loss tensors to see whether the user holds on to them."""
        if self._backend.is_tensor(loss) and getattr(loss, "grad_fn", None) is not None:
            self._watched_losses.append((self._step, weakref.ref(loss)))
        while self._watched_losses:
            step, ref = self._watched_losses[0]
            if self._step - step < _KEPT_LOSS_AGE:
                break
            self._watched_losses.popleft()
            tensor = ref()
            if tensor is not None and len(self._kept_losses) < _KEPT_LOSS_PROBES:
                self._kept_losses.append((step, bool(self._backend.graph_buffers_alive(tensor))))

    # -------------------------------------------------------------- samples
    def _finish_sample(self, sample):
        self._samples.append(sample)
        self._gradient_norms.append(sample.gradient_norm)
        for name, record in sample.activations.items():
            self._units.add(name, record)
        self._note_unit_gradients(sample)
        view = self._view()
        due = (self._last_full_check is None
               or sample.step - self._last_full_check >= FULL_CHECK_STEPS)
        if due:
            self._last_full_check = sample.step
        self._run_checks(view, urgent_only=not due)
        row = self._row(sample, view)
        self._history.add_row(row)
        if self._sinks:
            histograms = self._histograms() if any(getattr(s, "wants_histograms", False)
                                                   for s in self._sinks) else None
            for sink in self._sinks:
                sink.write(row, histograms)

    def _note_unit_gradients(self, sample):
        """Per output unit of each Linear/Conv layer: the largest |gradient| its weight row and
        bias entry got. A row of zeros alone may mean a zero input, so a layer without a bias
        counts only when some row got a gradient."""
        if not sample.gradient_norm > 0:     # a loss of exactly 0 tells nothing
            return
        for name in self._layout.unit_weights:
            weight = sample.gradients.get(name)
            bias = sample.gradients.get(self._layout.unit_biases.get(name))
            if weight is None or weight.row_max is None or not weight.finite:
                continue
            if bias is not None and bias.row_max is not None and bias.finite:
                magnitude = np.maximum(weight.row_max, bias.row_max)
            elif weight.abs_max > 0:
                magnitude = weight.row_max
            else:
                continue
            self._gradient_rows.add_magnitude(name, magnitude, sample.batch or 0)

    def _view(self):
        return WindowView(
            step=self._history.steps, every=self.every, samples=list(self._samples),
            losses=self._history.losses, layout=self._layout, thresholds=self.thresholds,
            learning_rates=learning_rates(self._optimizer),
            gradient_norms=self._gradient_norms.values,
            first_nonfinite_step=self._history.first_nonfinite_step,
            best_loss_level=self._history.best_level,
            eval_passes=list(self._eval_passes), eval_pass_count=self._eval_pass_count,
            kept_losses=list(self._kept_losses),
            units=self._units, gradient_rows=self._gradient_rows)

    def _run_checks(self, view, *, urgent_only=False):
        rank = {severity: i for i, severity in enumerate(SEVERITIES)}
        for finding in run_checks(view, urgent_only=urgent_only):
            key = (finding.code, finding.location)
            known = self._findings.get(key)
            if known is not None and rank[finding.severity] <= rank[known.severity]:
                continue
            self._findings[key] = finding
            if self._on_finding is not None:
                self._on_finding(finding)

    def _row(self, sample, view):
        """One row for the history and the sinks: ``{column: value}``."""
        row = {"step": sample.step, "loss": sample.loss, "gradient_norm": sample.gradient_norm}
        if view.learning_rate is not None:
            row["lr"] = view.learning_rate
        if sample.inputs is not None:
            row.update({"input/mean": sample.inputs.mean, "input/std": sample.inputs.std,
                        "input/min": sample.inputs.minimum, "input/max": sample.inputs.maximum})
        for layer, columns in self._activation_columns:
            record = sample.activations.get(layer.name)
            if record is None:
                continue
            values = (record.mean, record.std, record.minimum, record.maximum,
                      record.zero_fraction, view.dead_fraction(layer), record.saturated_fraction)
            row.update(zip(columns, values))   # "saturated" only where the layer has a column
        for param, columns, ratio_column in self._parameter_columns:
            grad = sample.gradients.get(param.name)
            if grad is not None:
                row.update(zip(columns, (grad.norm, grad.abs_mean, grad.abs_max)))
            update = self._last_updates.get(param.name)
            if update is not None:
                row[ratio_column] = update.ratio
        return row

    def _histograms(self):
        backend, arrays = self._backend, {}
        for param in self._layout.trainable:
            arrays[f"weight/{param.name}"] = backend.to_numpy(param.tensor)
            if param.tensor.grad is not None:
                arrays[f"gradient/{param.name}"] = backend.to_numpy(param.tensor.grad)
        return arrays

    def _first_tensor(self, output):
        if self._backend.is_tensor(output):
            return output
        if isinstance(output, (tuple, list)):
            return next((o for o in output if self._backend.is_tensor(o)), None)
        return None


def _require_count(value, argument, minimum):
    require(isinstance(value, numbers.Integral) and not isinstance(value, bool)
            and value >= minimum, argument, f"an integer >= {minimum}", repr(value))


def _checked_sinks(sinks):
    if sinks is None:
        return ()
    try:
        sinks = tuple(sinks)
    except TypeError:
        raise DiagnosticsError(
            f"sinks: expected a sequence of sinks (CSVSink, JSONLSink, TensorBoardSink, "
            f"WandbSink), got {type(sinks).__name__}") from None
    for sink in sinks:
        require(all(callable(getattr(sink, m, None)) for m in ("open", "write", "close")),
                "sinks", "objects with open(columns), write(row, histograms) and close()",
                type(sink).__name__)
    return sinks
