"""Backward passes between two optimizer steps, and how many of them ``.grad`` still held when
the step came: a ``zero_grad()`` between micro-batches throws the earlier ones away.

One permanent gradient hook on one parameter (it fires once per backward pass, before the
gradient joins ``.grad``: ``.grad is None`` there means it was cleared since the last pass)
and the optimizer's step pre-hook (torch; without one, ``Monitor.step`` closes the window).
Python only: no device work. A ``zero_grad(set_to_none=False)`` leaves zeros, not None, and
is not seen (reading them would cost a device sync per backward)."""
from dataclasses import dataclass, field

from .base import Probe


@dataclass
class AccumulationTrace:
    """Windows (optimizer steps) that discarded backward passes: ``(step, passes, discarded)``
    for the first few, and counts over the run."""

    windows: int = 0                  # optimizer steps with at least one backward pass
    accumulating: int = 0             # of them, with more than one backward pass
    dropping: list = field(default_factory=list)   # (step, passes, discarded), the first 10
    dropping_count: int = 0
    parameter: str | None = None


class AccumulationProbe(Probe):

    def __init__(self, ctx):
        super().__init__(ctx)
        self.trace = AccumulationTrace()
        self._handles = None
        self._passes = self._kept = self._discarded = 0

    def on_forward(self, args, kwargs, grad_enabled):
        if self._handles is None:      # hooked on the first model call (none before it)
            self._handles = self._attach_permanent()

    def _attach_permanent(self):
        layout = self.ctx.layout
        held = [p for p in layout.trainable if p.in_optimizer is not False]
        if not held:
            return []
        param = held[-1]           # the last layer's: a gradient in every backward pass
        self.trace.parameter = param.name
        handles = [self.ctx.backend.add_tensor_hook(param.tensor, self._backward_hook(param))]
        step_hook = _add_step_pre_hook(self.ctx.optimizer, self._close_window)
        return handles + ([step_hook] if step_hook is not None else [])

    def _backward_hook(self, param):
        def hook(grad):
            if param.tensor.grad is None:      # cleared: what the earlier passes left is gone
                self._discarded += self._kept
                self._kept = 0
            self._kept += 1
            self._passes += 1
            return None
        return hook

    def on_step(self, loss):
        self._close_window()
        return False

    def _close_window(self):
        passes, discarded = self._passes, self._discarded
        self._passes = self._kept = self._discarded = 0
        if passes == 0:
            return
        trace = self.trace
        trace.windows += 1
        trace.accumulating += passes > 1
        if discarded:
            trace.dropping_count += 1
            if len(trace.dropping) < 10:
                trace.dropping.append((self.ctx.step, passes, discarded))

    def view_fields(self):
        return {"signals": {"accumulation": self.trace}}

    def close(self):
        for handle in self._handles or []:
            handle.remove()
        self._handles = []


def _add_step_pre_hook(optimizer, close):
    """A torch optimizer's step pre-hook calling ``close()``, or None. A wrapper that does not
    set up torch's hook registry (accelerate's ``AcceleratedOptimizer``) is hooked through the
    optimizer it wraps (``.optimizer``); without any, ``Monitor.step`` closes the windows."""
    for candidate in (optimizer, getattr(optimizer, "optimizer", None)):
        register = getattr(candidate, "register_step_pre_hook", None)
        if not callable(register):
            continue
        try:
            return register(lambda opt, args, kwargs: close())
        except (AttributeError, TypeError, RuntimeError):
            continue
    return None
