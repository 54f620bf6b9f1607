"""The per-step tier (on by default; ``Monitor(per_step_gradients=False)`` turns it off): the
norm of every parameter's gradient at every optimizer step, so that a NaN/inf gradient or a
spike of the gradient norm is reported at the step it happens, not at the next sampled step;
and the step guard's actions on such a step (``guard.py``).

With a torch optimizer the norms are read at its step pre-hook, when ``.grad`` holds what the
step is about to apply (a GradScaler's ``scaler.step`` calls it after unscaling, and not at all
for the steps it skips), so that the guard can still keep the step from being applied. A step
given a closure (L-BFGS, Lightning) is judged when its closure's first evaluation returns.
Elsewhere (minigrad, no optimizer) the norms are read at ``Monitor.step``, after the step.
One norm per gradient (``kernels.gradient_norms``) and one transfer per step.

A spike is judged against the run's own history: the norm is above ``spike_factor`` times
the median of the last ``spike_history`` applied steps and above ``exp(spike_spread *
MAD)`` times it, MAD being the median absolute deviation of their logarithms, so a run whose
norm wanders widely (policy gradients, GANs) needs a jump that much larger. Nothing is judged
a spike before ``spike_min_history`` steps.

A bad step is traced to where it came from: the window's inputs are searched for NaN or inf
(the data); with ``guard_replay`` it is replayed (``replay.py``): the loss's gradient at the
output already non-finite (the loss or the targets), the first module whose output is
non-finite (the forward), a gradient that the model's backward makes non-finite (the
backward), or none of these when replayed (a transient fault).
"""
import math
import statistics
from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from ..guard import BadStep, GuardStopped, StepGuard
from ..history import Series
from ..replay import ForwardRecord, record_output_gradients, replay, total_norm
from .base import Probe, Signal
from .optimizer_hooks import add_step_hooks

KEPT = 20          # bad steps kept for the report (all are counted)
WINDOW_INPUTS = 64   # training forwards of one optimizer step kept for tracing


@dataclass(frozen=True)
class StepGradients(Signal):
    """What the per-step check reads (``view.signal(StepGradients)``)."""

    steps: np.ndarray        # the steps whose norms were read
    norms: np.ndarray        # the total gradient norm at each of them
    latest: dict             # parameter name -> its gradient norm at the latest of them
    loss_scaling: bool       # inf/NaN gradients read after the step are a GradScaler's skips
    bad: tuple[BadStep, ...]   # the first KEPT bad steps
    bad_count: int
    guard: str | None        # the Monitor's guard mode
    replayed: bool           # guard_replay was on
    closure_steps: int       # steps given a closure (judged at its first evaluation)


class StepGradientsProbe(Probe):
    publishes = (StepGradients,)

    def __init__(self, ctx):
        super().__init__(ctx)
        on = ctx.per_step_gradients or ctx.guard is not None
        self._params = [p for p in ctx.layout.trainable] if on else []
        self._names = [p.name for p in self._params]
        self._tensors = [p.tensor for p in self._params]
        self._steps, self._norms = Series(), Series()
        self._recent = deque(maxlen=ctx.thresholds.spike_history)   # applied steps' norms
        self._latest = None          # (names, norms) of the latest step read
        self._queued = None
        self._deferred = []          # (step, names, norms on the device): report-only steps
        self._bad, self._bad_count = [], 0
        self._urgent = False         # a bad step since the last Monitor.step
        self._judged_at = None       # the ctx.step whose norms the step hook read
        self._window = deque(maxlen=WINDOW_INPUTS)   # (batch index, args, kwargs)
        self._forwards = 0
        self._stashed = []           # (tensor, grad) set aside while a skipped step runs
        self._closure_steps = 0
        self._error = None           # an exception of a step hook, raised at Monitor.step
        self._guard = StepGuard(ctx.guard, max_consecutive_skips=ctx.max_consecutive_skips)
        self._records = deque(maxlen=WINDOW_INPUTS) if ctx.guard_replay else None
        self._hooks = None           # laid at the first forward, after the other probes'

    # ------------------------------------------------------------------ hooks
    def on_forward(self, args, kwargs, grad_enabled):
        if not self._params or not grad_enabled:
            return
        if self._hooks is None:
            self._hooks = self._lay_hooks()
        self._window.append((self._forwards, args, kwargs))
        self._forwards += 1
        if self._records is not None:
            self._records.append(ForwardRecord(args, kwargs, self.ctx.backend.rng_state(), []))

    def _lay_hooks(self):
        """The step hooks, laid after every other probe's (this runs at the first forward,
        after theirs): what they read at the step pre-hook is the gradients the user left."""
        ctx = self.ctx
        hooks = []
        if ctx.backend.name == "torch" and ctx.optimizer is not None:
            hooks = add_step_hooks(ctx.optimizer, before=self._before_step,
                                   after=self._after_step, with_args=True)
        if hooks and self._records is not None:
            hooks.append(ctx.backend.add_forward_hook(ctx.backend.model, self._on_output))
        return hooks

    def _on_output(self, module, args, output):
        if self.ctx.backend.grad_enabled() and self._records:
            record_output_gradients(self.ctx.backend, self._records[-1], output,
                                    self.ctx.backend.add_tensor_hook)

    def _before_step(self, optimizer, args, kwargs):
        """The optimizer's step pre-hook: judge, and act, before anything is applied."""
        self._restore()
        args = tuple(args)                  # torch's: the optimizer itself, then step's own
        closure = args[1] if len(args) > 1 else kwargs.get("closure")
        if closure is not None:
            self._closure_steps += 1
            wrapped = self._judging(closure, optimizer)
            return ((args[0], wrapped) + args[2:], kwargs) if len(args) > 1 else (
                args, {**kwargs, "closure": wrapped})
        self._judge_step(optimizer)
        return None

    def _judging(self, closure, optimizer):
        first = [True]

        def judged_closure(*args, **kwargs):
            loss = closure(*args, **kwargs)
            if first[0]:
                first[0] = False
                self._judge_step(optimizer)
            return loss
        return judged_closure

    def _after_step(self, optimizer, args, kwargs):
        self._restore()

    def _restore(self):
        stashed, self._stashed = self._stashed, []
        for tensor, grad in stashed:
            if tensor.grad is None:
                tensor.grad = grad

    # ---------------------------------------------------------------- judging
    def _judge_step(self, optimizer):
        """Measure the gradients about to be applied; act on a bad step."""
        step = self.ctx.step
        self._judged_at = step
        try:
            measured = self._measure()
            if measured is not None and self._guard.mode is None and not self._host_side(
                    measured[1]):
                # on an accelerator, report only: no synchronisation per step; the norms
                # travel with the next sampled step's transfer and name their own step
                self._deferred.append((step, measured[0], measured[1]))
                return
            bad = None if measured is None else self._record(
                step, measured[0], self._on_host(measured[1]))
            if bad is None:
                self._guard.good_step()
            else:
                self._act(bad, optimizer)
        except GuardStopped:
            raise
        except Exception as error:   # noqa: BLE001 - quoted at the next Monitor.step
            self._error = self._error or error
        finally:
            self._forget_window()

    def _forget_window(self):
        self._window.clear()
        if self._records is not None:
            self._records.clear()

    def _measure(self):
        grads = [tensor.grad for tensor in self._tensors]
        if all(grad is not None for grad in grads):   # the usual case: no list rebuilt
            return self._names, self.ctx.kernels.gradient_norms(grads)
        named = [(name, grad) for name, grad in zip(self._names, grads) if grad is not None]
        if not named:
            return None
        return [name for name, _ in named], self.ctx.kernels.gradient_norms(
            [grad for _, grad in named])

    def _host_side(self, norms):
        backend = self.ctx.backend
        return not backend.is_tensor(norms) or backend.on_host(norms)

    def _on_host(self, norms):
        backend = self.ctx.backend
        values = (norms.tolist() if backend.is_tensor(norms) and backend.on_host(norms)
                  else self.ctx.kernels.gather([norms])[0])
        if not isinstance(values, list):
            values = np.asarray(values, dtype=np.float64).reshape(-1).tolist()
        return values

    def _record(self, step, names, values):
        """Keep the step's norms; a ``BadStep`` (action not yet taken) or None."""
        total = math.hypot(*values)   # float64, without squaring: no overflow
        self._steps.append(step)
        self._norms.append(total)
        self._latest = (names, values)
        if not math.isfinite(total):
            broken = [name for name, v in zip(names, values) if not math.isfinite(v)]
            return self._bad_step(step, "nonfinite", total, None, broken[-1], len(broken))
        median = self._spike_median(total)
        if median is None:
            self._recent.append(total)
            return None
        largest = names[max(range(len(values)), key=values.__getitem__)]
        return self._bad_step(step, "spike", total, median, largest, 0)

    def _spike_median(self, total):
        thresholds = self.ctx.thresholds
        return spike_median(self._recent, total, factor=thresholds.spike_factor,
                            spread=thresholds.spike_spread,
                            min_history=thresholds.spike_min_history)

    def _bad_step(self, step, reason, total, median, parameter, nonfinite):
        batches = (self._window[0][0], self._window[-1][0]) if self._window else (-1, -1)
        return BadStep(step=step, batches=batches, reason=reason, norm=total, median=median,
                       parameter=parameter, nonfinite=nonfinite, source=None, detail="",
                       action="applied")

    # ----------------------------------------------------------------- acting
    def _act(self, bad, optimizer):
        bad, replayed = self._traced(bad)
        action = self._guard.action(replayed is not None, transient=bad.source == "transient")
        if action == "retried":
            self._apply_gradients(replayed)
        elif action in ("skipped", "stopped"):
            self._stash(optimizer)
        bad = replace(bad, action=action)
        self._keep(bad)
        self._urgent = True
        if action == "stopped":
            consecutive = self._guard.consecutive > self._guard.max_consecutive_skips
            report = self.ctx.report_now()
            self._restore()
            why = (f"{self._guard.consecutive} consecutive steps were bad (max_consecutive_"
                   f"skips={self._guard.max_consecutive_skips})" if consecutive
                   else "guard='stop'")
            raise GuardStopped(
                f"gradhunt stopped the training at step {bad.step} before its optimizer step "
                f"was applied ({why}): {_in_words(bad)}", report=report, bad_step=bad)

    def _traced(self, bad):
        """``bad`` with where it came from; and the replay's gradients when they are clean
        (a transient fault), else None."""
        found = _nonfinite_input(self.ctx.backend, self._window)
        if found is not None:
            return replace(bad, source="data", detail=found), None
        if self._records is None or self.ctx.report_now is None:
            return bad, None
        records = [r for r in self._records]
        if len(records) != 1:
            return replace(bad, detail=f"not replayed: {len(records)} forward passes in the "
                                       f"step (a replay takes one)"), None
        backend = self.ctx.backend
        named = [(name, p.tensor) for name, p in zip(self._names, self._params)]
        result = replay(backend, backend.model, records[0], named,
                        hooks_quiet=self.ctx.hooks_quiet)
        if result.error is not None:
            return replace(bad, detail=f"not replayed: the model raised {result.error}"), None
        if result.first_nonfinite_module is not None:
            return replace(bad, source="forward", detail=(
                f"replayed, the output of {result.first_nonfinite_module} is the first to "
                f"hold NaN or inf")), None
        if not records[0].output_finite:
            return replace(bad, source="transient", detail=(
                "the model's output held NaN or inf, and replayed from the same parameters, "
                "random state and batch it does not: a transient fault in the forward (the "
                "step is dropped: the loss's gradient of the faulty pass is not usable)")), None
        if result.nonfinite_output_gradient:
            return replace(bad, source="loss", detail=(
                f"the gradient the loss sent to the model's output at batch {bad.batches[1]} "
                f"holds NaN or inf from a finite output: the loss or its targets")), None
        grads = result.gradients
        if grads is None:
            return replace(bad, detail="not replayed: no output gradient was recorded"), None
        norm = total_norm(backend.torch, grads)
        clean = math.isfinite(norm) and (bad.reason == "nonfinite"
                                         or norm < self.ctx.thresholds.spike_factor
                                         * (bad.median or math.inf))
        if clean:
            return replace(bad, source="transient", detail=(
                f"replayed from the same parameters, random state and batch, the gradient "
                f"is clean (norm {norm:.4g}): a transient fault")), grads
        broken = [n for n, g in grads.items()
                  if g is not None and not bool(backend.torch.isfinite(g).all())]
        where = f" first at {broken[-1]}" if broken else ""
        return replace(bad, source="backward", detail=(
            f"replayed, the model's backward pass makes the gradient {_norm_words(norm)}"
            f"{where}: it reproduces")), None

    def _apply_gradients(self, grads):
        for name, param in zip(self._names, self._params):
            if name in grads:
                param.tensor.grad = grads[name]

    def _stash(self, optimizer):
        """Every gradient the optimizer would apply, set aside until its step returns."""
        for group in getattr(optimizer, "param_groups", ()):
            for tensor in group["params"]:
                if tensor.grad is not None:
                    self._stashed.append((tensor, tensor.grad))
                    tensor.grad = None

    # ---------------------------------------------------------------- Monitor
    def on_step(self, loss):
        if not self._params:
            return False
        self._restore()
        self._raise_hook_error()
        try:
            if self._judged_at == self.ctx.step:
                urgent, self._urgent = self._urgent, False
                return urgent
            # no step hook, or no optimizer step this iteration: read now, report only
            measured = self._measure()
            if measured is None:
                return False
            if self.ctx.sample is not None:   # with the sampled step's one transfer
                self._queued = (self.ctx.step, list(self._window), *measured)
                return False
            return self._judge_after(self.ctx.step, list(self._window), measured[0],
                                     self._on_host(measured[1]))
        finally:
            self._forget_window()

    def _judge_after(self, step, window, names, values):
        if not isinstance(values, list):
            values = np.asarray(values, dtype=np.float64).reshape(-1).tolist()
        bad = self._record(step, names, values)
        if bad is None or (bad.reason == "nonfinite" and self.ctx.loss_scaling):
            return False      # inf/NaN after a scaled step: the GradScaler skipped it
        found = _nonfinite_input(self.ctx.backend, window)
        if found is not None:
            bad = replace(bad, source="data", detail=found)
        self._keep(bad)
        return True

    def _keep(self, bad):
        self._bad_count += 1
        if len(self._bad) < KEPT:
            self._bad.append(bad)

    def skipped(self):
        """The bad steps the guard kept from being applied (the first KEPT)."""
        return tuple(b for b in self._bad if b.action in ("skipped", "stopped"))

    def _raise_hook_error(self):
        error, self._error = self._error, None
        if error is not None:
            raise error

    def contribute(self):
        queued = self._deferred + ([self._queued] if self._queued is not None else [])
        self._deferred, self._queued = [], None
        for step, *rest, norms in queued:
            window = rest[0] if len(rest) == 2 else []
            names = rest[-1]
            self.ctx.collector.add([norms], lambda parts, step=step, window=window,
                                   names=names: self._judge_after(step, window, names,
                                                                  parts[0]))

    def signals(self):
        if not self._params or self._norms.values.size == 0:
            return ()
        names, values = self._latest
        return (StepGradients(
            steps=self._steps.values, norms=self._norms.values, latest=dict(zip(names, values)),
            loss_scaling=self.ctx.loss_scaling, bad=tuple(self._bad), bad_count=self._bad_count,
            guard=self.ctx.guard, replayed=self.ctx.guard_replay,
            closure_steps=self._closure_steps),)

    def close(self):
        self._queued = None
        self._deferred = []
        self._restore()
        for handle in self._hooks or ():
            handle.remove()
        self._hooks = []
        self._forget_window()


def spike_median(recent, total, *, factor, spread, min_history):
    """The median of ``recent`` (positive norms) when ``total`` spikes above it, else None:
    above ``factor`` times it and above ``exp(spread * MAD)`` times it, MAD the median absolute
    deviation of the log norms. Cheap when not (one ``min`` over the history)."""
    if len(recent) < min_history or not total > factor * min(recent):
        return None
    logs = [math.log(v) for v in recent if v > 0]
    if len(logs) < min_history:
        return None
    centre = statistics.median(logs)
    deviation = statistics.median(abs(v - centre) for v in logs)
    median = math.exp(centre)
    return median if total > max(factor, math.exp(spread * deviation)) * median else None


def _nonfinite_input(backend, window):
    """'input x of batch k holds n NaN/inf values (rows ...)' for the first such tensor among
    the window's forward passes, or None."""
    for batch, args, kwargs in window:
        for where, tensor in _input_tensors(backend, args, kwargs):
            count, rows = _nonfinite_rows(backend, tensor)
            if count:
                shown = ", ".join(str(r) for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
                place = (f" (row{'s' if len(rows) > 1 else ''} {shown} of the batch)"
                         if rows else "")
                return (f"{where} of batch {batch} holds {count} NaN or inf "
                        f"value{'s' if count > 1 else ''}{place}")
    return None


def _nonfinite_rows(backend, tensor):
    """(count of NaN/inf entries, the rows along the first axis holding them)."""
    if backend.name != "torch":
        values = np.asarray(backend.to_numpy(tensor))
        if values.dtype.kind not in "fc" or values.ndim == 0 or values.size == 0:
            return 0, []
        bad = ~np.isfinite(values.reshape(values.shape[0], -1))
        return int(bad.sum()), np.flatnonzero(bad.any(1)).tolist()
    torch = backend.torch
    if tensor.layout != torch.strided:
        values = tensor.coalesce().values() if tensor.is_sparse else tensor.values()
        if not values.is_floating_point():
            return 0, []
        return int((~torch.isfinite(values.detach())).sum()), []
    if not tensor.is_floating_point() or tensor.dim() == 0 or tensor.numel() == 0:
        return 0, []
    bad = ~torch.isfinite(tensor.detach().reshape(tensor.shape[0], -1))
    count = int(bad.sum())
    return count, (torch.nonzero(bad.any(1)).reshape(-1).tolist() if count else [])


def _input_tensors(backend, args, kwargs):
    items = [(f"input {i}", a) for i, a in enumerate(args)]
    items += [(f"input {k!r}", v) for k, v in kwargs.items()]
    for where, value in items:
        values = (value.items() if isinstance(value, dict)
                  else enumerate(value) if isinstance(value, (tuple, list)) else None)
        if values is None:
            if backend.is_tensor(value):
                yield where, value
            continue
        for key, inner in values:
            if backend.is_tensor(inner):
                yield f"{where}[{key!r}]", inner


def _norm_words(norm):
    return "NaN or inf" if not math.isfinite(norm) else f"spike again (norm {norm:.4g})"


def _in_words(bad):
    what = ("the gradient holds NaN or inf" if bad.reason == "nonfinite"
            else f"the gradient norm spiked to {bad.norm:.4g}, {bad.norm / bad.median:.3g}x "
                 f"the recent median")
    where = f" ({bad.detail})" if bad.detail else ""
    return f"{what} at {bad.parameter}{where}"
