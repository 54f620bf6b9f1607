"""``Monitor``: watch a training loop through hooks: statistics, loss health and findings."""
from collections import deque
from contextlib import contextmanager

import numpy as np

from ..backends import get_backend
from ..errors import DiagnosticsError, require
from ..findings import Finding
from ..outputs import check_selector
from ..validators import check_float, check_int
from .checks import FULL_CHECK_STEPS, run_each
from .collector import Collector
from .distributed import SINKS_ON, RankExchange, broadcasts_buffers, process_group, unwrap
from .guard import DEFAULT_MAX_CONSECUTIVE_SKIPS, GUARD_MODES
from .history import History, columns_for
from .kernels import kernels_for
from .layout import Layout, learning_rates
from .lifecycle import FindingLog
from .probes import PROBES, Context, Probe
from .probes.ranks import RanksProbe
from .probes.step_gradients import StepGradientsProbe
from .records import Sample
from .report import MonitorReport
from .settings import DEFAULT_EVERY, DEFAULT_WINDOW, Thresholds
from .view import WindowView


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
    training step of a small MLP, so sample sparsely (the default 50) unless you are chasing a
    transient; ``benchmarks/monitor_overhead.py`` prints what each setting costs.

    Checks look back over the last ``window`` sampled steps. Each finding records the step it
    was first and last seen; once its check has run at three later steps without finding it
    again, it is resolved (``resolved_at``): kept in ``resolved``, out of ``findings`` and of
    the verdict. ``on_finding(finding)`` is called once per new finding (and again if its
    severity rises; ``print`` gives its line, ``finding.where`` its place in words),
    ``on_resolved(finding)`` once per resolved one; ``sinks`` receive one row per sampled step,
    and those with a ``write_finding`` method both transitions. ``output``
    says which entry of a dict, tuple or dataclass output is the logits (a key, a position or a
    callable), as in the tools; by default the rule of ``diagnostics.outputs`` decides.

    Mixed precision: pass the ``scaler`` (a ``torch.amp.GradScaler``) and call ``step`` after
    ``scaler.update()``: gradients are then judged divided by the loss scale, as the
    optimizer applies them, and the scaler's skipped steps are counted. A GradScaler not
    passed is found at its ``scale(loss)`` (``probes/mixed_precision.py``): the gradients are
    then judged divided by its scale too. Without any, fp16
    autocast is recognised, non-finite gradients count as skipped steps and gradient norms,
    scaled by an unknown factor, are judged only by their growth. With the scaler, the Monitor
    wraps ``torch.nn.utils.clip_grad_norm_`` and ``clip_grad_value_`` while it is open, to see
    clipping called before ``scaler.unscale_`` (``probes/clipping.py``); ``close()`` restores
    them.

    The per-step tier (``per_step_gradients``, on by default) reads the norm of every
    ``.grad`` at every optimizer step (at its step pre-hook with a torch optimizer, before the
    step applies them), so a NaN/inf gradient or a spike of the norm far above the run's own
    recent steps is reported at the step it happens, traced to its batch when that batch holds
    NaN or inf. ``guard`` says what to do with such a step: ``None`` reports it; ``"skip"``
    keeps the optimizer from applying it (parameters and optimizer state as if the step had not
    been taken; ``monitor.skipped_steps``), stopping after ``max_consecutive_skips`` in a row;
    ``"stop"`` raises ``GuardStopped`` before it is applied, once the report is written.
    ``guard_replay=True`` replays a bad step from its start on the same batch: a fault that
    does not come back is transient and the step is retried with the replay's gradients
    (``guard.py``, ``replay.py``). The guard needs a torch optimizer.
    Each signal is a probe (``monitor.probes``); the Monitor schedules the sampled steps,
    runs their one transfer, runs the checks, keeps the findings and feeds the sinks.
    Inside a torch.distributed job (``model`` may be the DDP wrapper) every rank builds its
    Monitor; the ranks exchange fingerprints and findings once per sampled step, within
    ``rank_timeout`` seconds, and every rank's findings are the merged ones (``monitor.
    distributed``); ``sinks_on="rank0"`` (the default) or ``"all"`` says which ranks write.
    The Monitor never changes the model, the optimizer or any random generator; ``close()``
    (or leaving the ``with`` block, also on an exception) removes every hook. On a few
    evaluation passes (the model in eval mode, called without gradients: the 1st, 10th, 100th
    and 1000th) it runs the forward twice more on copies of the inputs, with every hook set
    aside and the random generators and buffers put back, to see whether dropout still drops
    (DROPOUT_IGNORES_EVAL); this check adds nothing to training steps.
    """

    def __init__(self, model, optimizer=None, *, every=DEFAULT_EVERY, window=DEFAULT_WINDOW,
                 sinks=(), on_finding=None, on_resolved=None, thresholds=None, scaler=None,
                 per_step_gradients=True, guard=None, guard_replay=False,
                 max_consecutive_skips=DEFAULT_MAX_CONSECUTIVE_SKIPS, output=None,
                 sinks_on="rank0", rank_timeout=300.0):
        buffers_broadcast = broadcasts_buffers(model)
        model = unwrap(model)
        backend = get_backend(model)
        require(any(True for _ in backend.named_parameters()), "model",
                "a model with parameters (a Monitor watches how they learn)",
                f"a {type(model).__name__} that has none")
        check_selector(output)
        every = check_int(every, "every", minimum=1)
        window = check_int(window, "window", minimum=2)
        require(on_finding is None or callable(on_finding), "on_finding",
                "a callable taking a Finding, or None", type(on_finding).__name__)
        require(on_resolved is None or callable(on_resolved), "on_resolved",
                "a callable taking a Finding, or None", type(on_resolved).__name__)
        _require_scaler(scaler, backend)
        require(isinstance(per_step_gradients, bool), "per_step_gradients", "True or False",
                repr(per_step_gradients))
        _require_guard(guard, guard_replay, optimizer, backend)
        max_consecutive_skips = check_int(max_consecutive_skips, "max_consecutive_skips",
                                          minimum=1)
        require(thresholds is None or isinstance(thresholds, Thresholds), "thresholds",
                "a diagnostics.monitor.Thresholds or None", type(thresholds).__name__)
        sinks = _checked_sinks(sinks)
        require(sinks_on in SINKS_ON, "sinks_on", f"one of {SINKS_ON}", repr(sinks_on))
        rank_timeout = check_float(rank_timeout, "rank_timeout",
                                   expected="a positive number of seconds",
                                   accept=lambda v: v > 0)
        self.every, self.window = every, window
        self.thresholds = thresholds or Thresholds()
        self._backend = backend
        layout = Layout(backend, optimizer)
        kernels = kernels_for(backend)
        self._kernels, self._layout = kernels, layout
        self._collector = Collector(kernels)
        self._owner = None           # the probe whose code runs now: owns the hooks it adds
        self._hook_failures = []     # (owner, error) of hooks that raised, settled at step()
        self._silenced = set()       # ids of owners whose hooks raised: their hooks do nothing
        self._quiet = False          # a replay runs: every hook of the Monitor does nothing
        self._ctx = Context(backend=_GuardedHooks(backend, self), kernels=kernels, layout=layout,
                            collector=self._collector, history=None,
                            thresholds=self.thresholds, window=window, optimizer=optimizer,
                            scaler=scaler, per_step_gradients=per_step_gradients,
                            guard=guard, guard_replay=guard_replay,
                            max_consecutive_skips=max_consecutive_skips, output=output,
                            report_now=self._report_now, hooks_quiet=self._hooks_quiet)
        group = process_group()
        probe_classes = _ordered(PROBES + ((RanksProbe,) if group else ()))
        _require_one_publisher(probe_classes)
        self._probes = [self._made(probe) for probe in probe_classes]
        self._ranks = None
        self._ranks_probe = next((p for p in self._probes if isinstance(p, RanksProbe)), None)
        self._step_gradients = next(p for p in self._probes
                                    if isinstance(p, StepGradientsProbe))
        if group:   # a collective: every rank builds its Monitor
            self._ranks_probe.watch_buffers(not buffers_broadcast)
            self._ranks = RankExchange(*group, [p.name for p in layout.trainable],
                                       timeout=rank_timeout, window=window,
                                       buffers=self._ranks_probe.buffer_names)
            if sinks_on == "rank0" and group[0] != 0:
                sinks = ()
        columns = columns_for(layout, learning_rate=bool(learning_rates(optimizer)))
        self._history = self._ctx.history = History(
            columns + [c for probe in self._probes for c in probe.columns()])
        self._phases = {}            # probe method -> ((probe, bound method), ...)
        self._dispatch()
        self._samples = deque(maxlen=window)
        self._log = FindingLog()
        self._on_finding, self._on_resolved = on_finding, on_resolved
        self._last_full_check = None
        self._sampled_hooks = []
        self._hooks_of = {}          # probe -> its sampled hooks, to take off a failed probe
        self._failed_checks = set()
        self._fields_of = {}         # probe -> its latest view fields
        self._signals_of = {}        # probe -> its latest signals
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
        self._settle_hook_failures()
        try:
            urgent = any(self._each("on_step", loss))
            if self._ctx.sample is not None:
                self._each("on_sampled_step", loss)
        finally:
            self._ctx.walked = None   # the loss's graph walk, shared by the probes: let it go
        sample = self._ctx.sample
        if sample is not None:
            self._gather()
            self._finish_sample(sample)
        elif urgent:
            self._gather()
            self._run_checks(self._view(), urgent_only=True)
        self._ctx.step += 1
        self._begin_iteration()

    def report(self):
        """A ``MonitorReport``: findings, per-layer and per-parameter statistics, history."""
        self._settle_hook_failures()
        self._gather()
        view = self._view()
        self._run_checks(view)
        return self._report_of(view)

    def _report_of(self, view):
        extra = {}
        for fields in self._each("report_fields"):
            extra.update(fields or {})
        return MonitorReport.build(
            view=view, history=self._history, findings=self.findings,
            resolved=self.resolved, backend=self._backend.name,
            model_type=self._layout.root_type, **extra)

    @property
    def findings(self):
        """The findings that hold, errors first, then in the order they were found (in a
        distributed job, merged over the ranks)."""
        found = self._log.active
        return found if self._ranks is None else self._ranks.merged(found)

    @property
    def resolved(self):
        """Findings that stopped holding, in the order they were resolved."""
        return self._log.resolved

    @property
    def history(self):
        return self._history

    @property
    def skipped_steps(self):
        """The optimizer steps the guard kept from being applied (``guard.BadStep`` records,
        ``.step``, ``.batches``, ``.reason``, ``.detail``), in order; the first 20."""
        return self._step_gradients.skipped()

    def close(self):
        """Remove every hook and close the sinks; idempotent. ``report()`` still works."""
        if self._closed:
            return
        self._closed = True
        self._ctx.sample = None
        try:
            _close_all(self._probes)
            self._kernels.release_scratch()
        finally:
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
        """Arm the probes' hooks when the coming iteration is sampled, disarm them when not."""
        ctx = self._ctx
        if not self._is_sampled(ctx.step):
            ctx.sample = None
            self._remove_sampled_hooks()
            return
        ctx.sample = Sample(ctx.step)
        self._each("begin")
        if not self._sampled_hooks:
            for probe, attach in self._phases["attach"]:
                handles = self._guarded(probe, attach, "attach") or []
                self._hooks_of[probe] = list(handles)
                self._sampled_hooks += handles

    def _remove_sampled_hooks(self):
        handles, self._sampled_hooks = self._sampled_hooks, []
        self._hooks_of = {}
        for handle in reversed(handles):   # last in, first out: what a hook added goes too
            handle.remove()

    def _on_forward_start(self, module, args, kwargs):
        """Forward pre-hook on the model, always attached: every model call, for the probes
        that watch them (evaluation passes, the optimizer's step, the input)."""
        if self._quiet:
            return None
        self._each("on_forward", args, kwargs, self._backend.grad_enabled())
        return None

    # ---------------------------------------------------------------- samples
    def _gather(self):
        """Every probe's queued results to the host, in one transfer."""
        self._each("contribute")
        try:
            self._collector.flush()
        except Exception as error:     # a statistic failed on the device: skip this sample's
            self._collector.clear()
            self._record_error("the transfer of a sampled step's statistics", error)

    def _finish_sample(self, sample):
        self._samples.append(sample)
        self._each("finish", sample)
        view = self._view()
        due = (self._last_full_check is None
               or sample.step - self._last_full_check >= FULL_CHECK_STEPS)
        if due:
            self._last_full_check = sample.step
        self._run_checks(view, urgent_only=not due)
        if self._ranks is not None:
            self._exchange(sample.step)
        row = {"step": sample.step}
        self._each("fill_row", row, sample, view)
        self._history.add_row(row)
        if self._sinks:
            histograms = self._histograms() if any(getattr(s, "wants_histograms", False)
                                                   for s in self._sinks) else None
            for sink in self._sinks:
                sink.write(row, histograms)

    def _exchange(self, step):
        """This rank's fingerprints and findings to the other ranks, theirs here."""
        fingerprints = self._ranks_probe.last
        for finding in self._ranks.exchange(step, fingerprints, self._log.active):
            if self._on_finding is not None:
                self._on_finding(finding)

    def _view(self):
        probes = self._phases["view_fields"]
        for (probe, _), part in zip(probes, self._each("view_fields")):
            if part is not None:
                self._fields_of[probe] = part
        probes = self._phases["signals"]
        for (probe, _), published in zip(probes, self._each("signals")):
            if published is not None and self._declared(probe, published):
                self._signals_of[probe] = tuple(published)
        fields = {"losses": np.zeros(0)}
        for part in self._fields_of.values():   # a probe turned off: what it last saw
            fields.update(part)
        signals = tuple(value for published in self._signals_of.values() for value in published)
        return WindowView(step=self._history.steps, every=self.every,
                          samples=list(self._samples), layout=self._layout,
                          thresholds=self.thresholds, signals=signals, **fields)

    def _declared(self, probe, published):
        """Whether ``published`` holds only kinds ``probe`` declares, one value each; if not,
        the probe is turned off (MONITOR_ERROR), its signals left out of the view."""
        kinds = [type(value) for value in published]
        stray = [k.__name__ for k in kinds if k not in type(probe).publishes]
        if not stray and len(set(kinds)) == len(kinds):
            return True
        self._probe_failed(probe, "signals", TypeError(
            f"it published {', '.join(k.__name__ for k in kinds)}; it declares "
            f"publishes={tuple(k.__name__ for k in type(probe).publishes)}, one value each"))
        return False

    def _run_checks(self, view, *, urgent_only=False, step=None):
        if step is None:
            step = self._history.steps - 1   # the iteration that just ended
        for finding in self._log.update(step, run_each(view, urgent_only=urgent_only,
                                                    skip=self._failed_checks,
                                                    on_error=self._check_failed)):
            for sink in self._sinks:
                write = getattr(sink, "write_finding", None)
                if write is not None:
                    write(finding)
            callback = self._on_resolved if finding.resolved else self._on_finding
            if callback is not None:
                callback(finding)

    # ----------------------------------------------------------------- errors
    def _dispatch(self):
        """Per probe method, the probes that override it with their bound method: a phase
        calls only those (``Probe``'s no-ops cost nothing on the hot path)."""
        self._phases = {method: tuple((p, getattr(p, method)) for p in self._probes
                                      if getattr(type(p), method) is not getattr(Probe, method))
                        for method in _PHASES}

    def _each(self, method, *args):
        """``probe.method(*args)`` for every probe that overrides it, in order: their results
        (None for a probe that raised, see ``_guarded``)."""
        results = []
        outer = self._owner
        for probe, call in self._phases[method]:
            self._owner = probe
            try:
                results.append(call(*args))
            except DiagnosticsError:   # a bad argument of the user's (a loss that is no loss)
                raise
            except Exception as error:
                self._probe_failed(probe, method, error)
                results.append(None)
            finally:
                self._owner = outer
        return results

    def _guarded(self, probe, call, method, *args):
        """``call(*args)``, ``call`` being ``probe.method``; if it raises, the probe is turned
        off for the rest of the run (its hooks removed) and a MONITOR_ERROR quotes the
        exception: a bug of the Monitor on an unusual model must never stop the training."""
        outer, self._owner = self._owner, probe
        try:
            return call(*args)
        except DiagnosticsError:
            raise
        except Exception as error:
            self._probe_failed(probe, method, error)
            return None
        finally:
            self._owner = outer

    def _made(self, probe_class):
        """A probe built on the shared context (the hooks its ``__init__`` adds are its own)."""
        self._owner = probe_class
        try:
            return probe_class(self._ctx)
        finally:
            self._owner = None

    def _shielded(self, hook):
        """``hook`` as the framework will call it: inside the user's forward or backward, so
        an exception never leaves it. It turns the hook off (and its probe's others) and waits
        for the next ``step`` or ``report``, where its probe is turned off and quoted
        (MONITOR_ERROR): removing hooks while the framework runs them is not safe."""
        owner = self._owner

        def shielded(*args, **kwargs):
            if self._quiet or id(owner) in self._silenced:
                return None
            outer, self._owner = self._owner, owner
            try:
                return hook(*args, **kwargs)
            except Exception as error:   # noqa: BLE001 - quoted at the next step
                if owner is not None:
                    self._silenced.add(id(owner))
                self._hook_failures.append((owner, error))
                return None
            finally:
                self._owner = outer
        return shielded

    def _settle_hook_failures(self):
        failures, self._hook_failures = self._hook_failures, []
        for owner, error in failures:
            probe = next((p for p in self._probes if p is owner or type(p) is owner), None)
            if probe is not None:
                self._probe_failed(probe, "hook", error)
            elif owner is None:     # a hook of no probe: quoted, nothing to turn off
                self._record_error("a hook", error)

    def _probe_failed(self, probe, method, error):
        self._disable_probe(probe)
        self._record_error(f"its {type(probe).__name__} ({method})", error)

    def _disable_probe(self, probe):
        try:
            probe.close()          # its own permanent hooks
        except Exception:
            pass                   # already reported; the rest of the Monitor goes on
        if probe in self._probes:
            self._probes.remove(probe)
        self._dispatch()
        for handle in self._hooks_of.pop(probe, []):
            handle.remove()
            self._sampled_hooks.remove(handle)

    def _check_failed(self, check, error):
        self._failed_checks.add(check)
        self._record_error(f"its check {check.__name__}", error)

    def _record_error(self, what, error):
        finding = Finding(
            "MONITOR_ERROR", "info", None,
            f"the Monitor turned off {what} at step {self._ctx.step}: it raised "
            f"{type(error).__name__}: {error}; training goes on, the rest of the Monitor "
            f"still watches",
            "nothing to change in your training loop; the signals of the part turned off are "
            "missing from the report (please report this exception to gradhunt)",
            {"part": what, "step": self._ctx.step,
             "exception": f"{type(error).__name__}: {error}"})
        if self._log.record(finding, key=(finding.code, what), step=self._ctx.step):
            if self._on_finding is not None:
                self._on_finding(finding)

    def _report_now(self):
        """The report with the urgent checks run at the step under way (the guard's, before
        it stops the training); the findings go to the callbacks and sinks as usual."""
        self._settle_hook_failures()
        self._gather()
        view = self._view()
        self._run_checks(view, urgent_only=True, step=self._ctx.step)
        return self._report_of(view)

    @contextmanager
    def _hooks_quiet(self):
        outer, self._quiet = self._quiet, True
        try:
            yield
        finally:
            self._quiet = outer

    def _histograms(self):
        backend, arrays = self._backend, {}
        for param in self._layout.trainable:
            arrays[f"weight/{param.name}"] = backend.to_numpy(param.tensor)
            if param.tensor.grad is not None:
                arrays[f"gradient/{param.name}"] = backend.to_numpy(param.tensor.grad)
        return arrays


# the probe methods the Monitor calls (``probes.base.Probe``)
_PHASES = ("attach", "begin", "on_forward", "on_step", "on_sampled_step", "contribute",
           "finish", "signals", "view_fields", "fill_row", "report_fields")


def _ordered(probe_classes):
    """The probes in the order their moments run: as listed, those that declare
    ``runs_last`` after the others (``RanksProbe``)."""
    return tuple(sorted(probe_classes, key=lambda probe_class: probe_class.runs_last))


def _require_one_publisher(probe_classes):
    """Each signal kind has one publisher: two probes declaring one kind would hand the checks
    one value or the other, depending on the order they ran."""
    publisher = {}
    for probe_class in probe_classes:
        for kind in probe_class.publishes:
            other = publisher.setdefault(kind, probe_class)
            if other is not probe_class:
                raise TypeError(
                    f"the signal {kind.__name__} is published by two probes, "
                    f"{other.__name__} and {probe_class.__name__}: each signal kind has one "
                    f"publisher (Probe.publishes)")


class _GuardedHooks:
    """The framework backend as the probes see it: every hook a probe adds through it runs
    shielded (``Monitor._shielded``), and a tensor hook is not called for a gradient of None
    (torch calls it so when a custom ``autograd.Function``'s backward returns None for an
    input that requires grad: no gradient arrived there, as minigrad never calls it)."""

    def __init__(self, backend, monitor):
        self._backend, self._monitor = backend, monitor

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def add_tensor_hook(self, tensor, hook):
        shielded = self._monitor._shielded(hook)

        def on_gradient(grad):
            return None if grad is None else shielded(grad)
        return self._backend.add_tensor_hook(tensor, on_gradient)

    def add_forward_hook(self, module, hook):
        return self._backend.add_forward_hook(module, self._monitor._shielded(hook))

    def shielded(self, hook):
        """``hook`` shielded as the Monitor's own hooks are, for a hook a probe registers
        itself (a global module hook: ``probes/target_network.py``)."""
        return self._monitor._shielded(hook)

    def add_forward_pre_hook(self, module, hook, *, with_kwargs=False):
        return self._backend.add_forward_pre_hook(module, self._monitor._shielded(hook),
                                                  with_kwargs=with_kwargs)


def _require_guard(guard, guard_replay, optimizer, backend):
    require(guard in GUARD_MODES, "guard", f"one of {GUARD_MODES}", repr(guard))
    require(isinstance(guard_replay, bool), "guard_replay", "True or False", repr(guard_replay))
    require(not guard_replay or guard == "skip", "guard_replay",
            "False unless guard='skip' (a replayed fault that clears is retried)",
            f"True with guard={guard!r}")
    if guard is not None:
        hookable = any(callable(getattr(o, "register_step_pre_hook", None))
                       for o in (optimizer, getattr(optimizer, "optimizer", None)))
        require(backend.name == "torch" and hookable, "guard",
                "None unless the Monitor is given a torch optimizer (the guard acts at its "
                "step)", f"guard={guard!r} with {type(optimizer).__name__}")


def _require_scaler(scaler, backend):
    if scaler is None:
        return
    amp = getattr(getattr(backend, "torch", None), "amp", None)
    require(backend.name == "torch" and isinstance(scaler, amp.GradScaler), "scaler",
            "a torch.amp.GradScaler (the one whose scale(loss) you call backward on) or None",
            type(scaler).__name__)


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


def _close_all(probes):
    """Close every probe even when one raises (a probe may hold a patch or a hook that must
    come off); the first error is raised once all are closed."""
    error = None
    for probe in probes:
        try:
            probe.close()
        except Exception as exc:  # noqa: BLE001 - re-raised below, after the others closed
            error = error or exc
    if error is not None:
        raise error
