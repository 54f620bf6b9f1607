"""Backward passes between two optimizer steps, and how many of them ``.grad`` still held when
the step came: a ``zero_grad()`` between micro-batches throws the earlier ones away.

One permanent gradient hook on one parameter (it fires once per backward pass, before the
gradient joins ``.grad``: ``.grad is None`` there means it was cleared since the last pass)
and the optimizer's step pre-hook (torch; without one, ``Monitor.step`` closes the window).
Python only: no device work.

Two kinds of pass are not the step's micro-batches, so clearing them discards nothing:

- passes run *inside* the optimizer's step, between its pre- and post-hook: a closure the step
  evaluates (L-BFGS calls ``zero_grad``, forward and backward up to ``max_iter`` times, and
  reads each result itself);
- passes that another optimizer's step came after before ``.grad`` was cleared: they fed that
  step (a GAN's generator loss runs back through the discriminator, whose own optimizer then
  clears what it left; torch's global optimizer-step hook sees the other step). A ``zero_grad(set_to_none=False)`` leaves zeros, not None, and
is not seen (reading them would cost a device sync per backward)."""
from dataclasses import dataclass, replace

from .base import Probe, Signal
from .optimizer_hooks import add_step_hooks


@dataclass(frozen=True)
class DroppedWindow:
    """One optimizer step whose window of backward passes lost some to a ``zero_grad``."""

    step: int
    passes: int             # backward passes since the previous optimizer step
    discarded: int          # of them, cleared before this step applied them


@dataclass(frozen=True)
class AccumulationTrace(Signal):
    """Windows (optimizer steps) that discarded backward passes: the first few, and counts
    over the run."""

    windows: int = 0                  # optimizer steps with at least one backward pass
    accumulating: int = 0             # of them, with more than one backward pass
    dropping: tuple[DroppedWindow, ...] = ()   # the first 10
    dropping_count: int = 0
    parameter: str | None = None


class AccumulationProbe(Probe):
    publishes = (AccumulationTrace,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.trace = AccumulationTrace()
        self._handles = None
        self._passes = self._kept = self._discarded = 0
        self._served = 0            # passes of the window that another optimizer's step used
        self._in_step = False       # between this optimizer's step pre- and post-hook

    def on_forward(self, args, kwargs, grad_enabled):
        if self._handles is None:      # hooked on the first model call (none before it)
            self._handles = self._attach_permanent()

    def _attach_permanent(self):
        layout = self.ctx.layout
        held = [p for p in layout.trainable if p.in_optimizer is not False]
        if not held:
            return []
        param = held[-1]           # the last layer's: a gradient in every backward pass
        self.trace = replace(self.trace, parameter=param.name)
        handles = [self.ctx.backend.add_tensor_hook(param.tensor, self._backward_hook(param))]
        optimizer = self.ctx.optimizer
        hooks = add_step_hooks(optimizer, before=self._enter_step, after=self._leave_step)
        if hooks and self.ctx.backend.name == "torch":
            own = {id(optimizer), id(getattr(optimizer, "optimizer", None))}
            hooks += _add_other_step_hook(own, self._other_step)
        return handles + hooks

    def _enter_step(self):
        self._close_window()
        self._in_step = True

    def _leave_step(self):
        """The step evaluated its closure's passes itself: none of them is a micro-batch."""
        self._in_step = False
        self._passes = self._kept = self._discarded = self._served = 0

    def _other_step(self):
        """Another optimizer stepped: the passes ``.grad`` still holds served its step."""
        if not self._in_step:
            self._served += self._kept
            self._kept = 0

    def _backward_hook(self, param):
        def hook(grad):
            if self._in_step:                  # a closure the step evaluates itself
                return None
            if param.tensor.grad is None:      # cleared: what the earlier passes left is gone
                self._discarded += self._kept
                self._kept = 0
            self._kept += 1
            self._passes += 1
            return None
        return hook

    def on_step(self, loss):
        if self._in_step:   # Monitor.step from a global step post-hook, before this one's
            self._leave_step()
        else:
            self._close_window()
        return False

    def _close_window(self):
        passes, discarded = self._passes - self._served, self._discarded
        self._passes = self._kept = self._discarded = self._served = 0
        if passes == 0:
            return
        trace = self.trace
        dropping, count = trace.dropping, trace.dropping_count
        if discarded:
            count += 1
            if len(dropping) < 10:
                dropping += (DroppedWindow(self.ctx.step, passes, discarded),)
        self.trace = replace(trace, windows=trace.windows + 1,
                             accumulating=trace.accumulating + (passes > 1),
                             dropping=dropping, dropping_count=count)

    def signals(self):
        return (self.trace,)

    def close(self):
        for handle in self._handles or []:
            handle.remove()
        self._handles = []


def _add_other_step_hook(own, on_other):
    """torch's global optimizer-step pre-hook calling ``on_other()`` when an optimizer other
    than the ``own`` ids steps; ``[]`` when this torch has none."""
    import importlib

    try:
        register = importlib.import_module("torch.optim.optimizer") \
            .register_optimizer_step_pre_hook
    except (ImportError, AttributeError):
        return []

    def hook(optimizer, args, kwargs):
        if id(optimizer) not in own:
            on_other()
    return [register(hook)]
