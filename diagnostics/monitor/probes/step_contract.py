"""The step recorder: what each optimizer step's calls did to the gradients it applied.

Every PyTorch step keeps one contract, whatever code writes it: the gradients are cleared
once per optimizer step (either way: ``.grad = None`` or zeros) and never between a backward
pass and the step that applies it; a clipping call acts on the gradients the next
``optimizer.step()`` applies. The recorder follows one parameter the optimizer holds (the last
layer's: it has a gradient in every backward pass) and the optimizer's step hooks, and splits
time into windows, one per optimizer step:

- a backward pass is seen by a gradient hook on that parameter (before the gradient joins
  ``.grad``) and by a post-accumulate hook (after it). Between two passes ``.grad`` should be
  what the last one left: the same tensor at the same version counter. ``None`` means it was
  cleared (``zero_grad()``, ``p.grad = None``); another version means it was written in
  place, and a ``.grad`` that holds only zeros then was cleared (``zero_grad(set_to_none=
  False)``, ``p.grad.zero_()``). Zeros are read only after such a write inside a window, which
  a healthy loop does not make (a clip or an unscale comes after the window's last pass);
- at the step's pre-hook, ``.grad`` cleared since the window's last pass means the step
  applied nothing of it;
- clipping calls (torch's ``clip_grad_norm_``/``clip_grad_value_``, through the patch that
  ``probes.clipping`` lays) are placed in the window: after its last backward pass (they clip
  what the step applies), before its first (after the previous step: what they clipped was
  applied already, or cleared), or with no tensor holding a gradient (an exhausted generator,
  a copy of the model): no effect either way.

Passes inside the optimizer's step (a closure the step evaluates, as L-BFGS and Lightning do)
and passes that fed another optimizer's step (a GAN's other player) are not the window's
micro-batches. Python only, apart from the zeros read after an in-place write inside a window.
"""
from dataclasses import dataclass, field

from ..layout import optimizer_parameter_ids
from .base import Probe, Signal
from .clipping import _PATCH as CLIPPING_PATCH
from .optimizer_hooks import add_step_hooks

KEPT = 10      # examples of each kind kept for the report
_PASSED = object()   # a backward pass left a gradient whose version is not known


@dataclass(frozen=True)
class DiscardingWindow:
    """An optimizer step whose window cleared ``.grad`` between its backward passes."""

    step: int
    passes: int           # backward passes since the previous optimizer step
    discarded: int        # of them, cleared before the step came
    how: str              # "set to None" or "zeroed in place"


@dataclass(frozen=True)
class ClearedBeforeStep:
    """An optimizer step that came after its window's gradient was cleared."""

    step: int
    passes: int
    how: str


@dataclass(frozen=True)
class IneffectiveClip:
    """A window whose clipping calls did not act on the gradients its step applied."""

    step: int
    function: str         # "clip_grad_norm_" or "clip_grad_value_"
    reason: str           # "before_backward" or "no_gradients"
    tensors: int          # tensors the call was given
    with_gradient: int    # of them, holding a gradient


@dataclass(frozen=True)
class StepContract(Signal):
    """What the recorder saw over the run so far (``view.signal(StepContract)``)."""

    parameter: str | None             # the followed parameter
    windows: int                      # optimizer steps with at least one backward pass
    accumulating: int                 # of them, with more than one backward pass
    discarding: tuple[DiscardingWindow, ...]   # the first KEPT
    discarding_count: int
    cleared: tuple[ClearedBeforeStep, ...]     # the first KEPT
    cleared_count: int
    clipped_windows: int              # windows with a clipping call outside the step
    ineffective: tuple[IneffectiveClip, ...]   # the first KEPT
    ineffective_count: int


@dataclass
class _Tally:
    """The recorder's running counts (what ``StepContract`` freezes)."""

    parameter: str | None = None
    windows: int = 0
    accumulating: int = 0
    discarding: list = field(default_factory=list)
    discarding_count: int = 0
    cleared: list = field(default_factory=list)
    cleared_count: int = 0
    clipped_windows: int = 0
    ineffective: list = field(default_factory=list)
    ineffective_count: int = 0

    def frozen(self) -> StepContract:
        return StepContract(self.parameter, self.windows, self.accumulating,
                            tuple(self.discarding), self.discarding_count, tuple(self.cleared),
                            self.cleared_count, self.clipped_windows, tuple(self.ineffective),
                            self.ineffective_count)


class StepContractProbe(Probe):

    publishes = (StepContract,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.contract = _Tally()
        self._handles = None
        self._param = None
        self._post_hooked = False
        self._step_hooked = False
        self._held = None           # (group sizes, ids of the optimizer's tensors)
        self._listening = False
        self._error = None          # an exception of a hook, raised where the Monitor guards
        self._reset_window()
        self._in_step = False       # between this optimizer's step pre- and post-hook
        self._after = None          # (grad tensor id, version) the last backward pass left
        self._scale_at_start = self._scale_token()

    def _reset_window(self):
        self._passes = self._kept = self._discarded = self._served = 0
        self._how = None            # how the window's passes were cleared
        self._clips = []            # (function, reason or None) of the window's clip calls

    # ------------------------------------------------------------------ hooks
    def on_forward(self, args, kwargs, grad_enabled):
        if self._handles is None:      # hooked on the first model call (none before it)
            self._handles = self._attach_permanent()

    def _attach_permanent(self):
        ctx = self.ctx
        held = [p for p in ctx.layout.trainable if p.in_optimizer is not False]
        if not held:
            return []
        self._param = param = held[-1]
        self.contract.parameter = param.name
        backend = ctx.backend
        handles = [backend.add_tensor_hook(param.tensor, self._guarded(self._before_pass))]
        post = getattr(param.tensor, "register_post_accumulate_grad_hook", None)
        self._post_hooked = callable(post)
        if self._post_hooked:
            handles.append(post(self._guarded(self._after_pass)))
        optimizer = ctx.optimizer
        hooks = add_step_hooks(optimizer, before=self._guarded(self._enter_step),
                               after=self._guarded(self._leave_step))
        self._step_hooked = bool(hooks)
        if hooks and backend.name == "torch":
            own = {id(optimizer), id(getattr(optimizer, "optimizer", None))}
            hooks += _add_other_step_hook(own, self._guarded(self._other_step))
            CLIPPING_PATCH.listen(self)
            self._listening = True
        return handles + hooks

    def _guarded(self, function):
        """``function`` as a hook that never raises into the user's loop: the first error
        waits for the next transfer, where the Monitor turns the probe off and quotes it."""
        def hook(*args):
            try:
                function(*args)
            except Exception as error:   # noqa: BLE001 - the user's tensors, any shape
                self._error = self._error or error
            return None
        return hook

    def _before_pass(self, grad):
        if self._in_step:                  # a closure the step evaluates itself
            return
        scale = self._scale_token()
        if scale != self._scale_at_start:  # the GradScaler updated: after a step, or
            self._scale_at_start = scale   # without one, when it skipped the step (inf
            if self._passes:               # gradients): then its passes were a window
                self._reset_window()
        how = self._cleared_since_last_pass()
        if how is not None and self._kept:
            self._discarded += self._kept
            self._kept = 0
            self._how = self._how or how
        self._kept += 1
        self._passes += 1
        if not self._post_hooked:      # minigrad: a clearing is seen as None only
            self._after = _PASSED

    def _after_pass(self, tensor):
        grad = tensor.grad
        self._after = None if grad is None else (id(grad), grad._version)

    def _cleared_since_last_pass(self):
        """"set to None" or "zeroed in place" when ``.grad`` no longer holds what the last
        backward pass left; None when it does (or no pass left anything yet)."""
        grad = self._param.tensor.grad
        if self._after is None:
            return None
        if grad is None:
            return "set to None"
        if self._after is _PASSED or (id(grad), grad._version) == self._after:
            return None
        if self._may_read(grad) and not bool(grad.any()):
            return "zeroed in place"
        return None                        # written but not cleared (clipped, unscaled)

    def _may_read(self, grad):
        """Reading ``.grad``'s values waits for the device: on CPU always, elsewhere on
        sampled iterations only (a bug of every step is seen on those); never on a sparse
        gradient."""
        if getattr(grad, "is_sparse", False):
            return False
        device = getattr(grad, "device", None)
        return self.ctx.sample is not None or getattr(device, "type", "cpu") == "cpu"

    def _scale_token(self):
        """(id, version) of the GradScaler's scale tensor, which ``update()`` writes in place
        once per step it ends, taken or skipped; None without a scaler."""
        scale = getattr(self.ctx.scaler, "_scale", None)
        version = getattr(scale, "_version", None)
        return None if version is None else (id(scale), version)

    def _enter_step(self):
        if self._passes and not self._in_step:
            how = self._cleared_since_last_pass()
            if how is not None and self._kept:
                contract = self.contract
                contract.cleared_count += 1
                if len(contract.cleared) < KEPT:
                    contract.cleared.append(ClearedBeforeStep(self.ctx.step, self._passes, how))
        self._close_window()
        self._in_step = True
        self._scale_at_start = self._scale_token()

    def _leave_step(self):
        """The step evaluated its closure's passes itself: none of them is a micro-batch."""
        self._in_step = False
        self._reset_window()

    def _other_step(self):
        """Another optimizer stepped: the passes ``.grad`` still holds served its step."""
        if not self._in_step:
            self._served += self._kept
            self._kept = 0

    def note(self, function, parameters, args, kwargs, result):
        """A clipping call ran (told by the clipping patch, after the original)."""
        try:
            if self._in_step:          # inside the step's closure: after its backward
                return
            with_gradient = [p for p in parameters if getattr(p, "grad", None) is not None]
            held = self._held_ids()
            if any(id(t) in held for t in parameters):
                reason = "before_backward" if not self._passes else None
            elif not with_gradient:
                reason = "no_gradients"    # nothing given, or a copy's tensors
            else:
                return                 # another model's gradients (a GAN's other player)
            self._clips.append((function, reason, len(parameters), len(with_gradient)))
        except Exception as error:     # noqa: BLE001
            self._error = self._error or error

    def _held_ids(self):
        """Ids of the optimizer's tensors, rebuilt only when its groups change size (a clip
        call per step should not rebuild the set each time)."""
        groups = getattr(self.ctx.optimizer, "param_groups", None) or []
        sizes = tuple(len(group["params"]) for group in groups)
        if self._held is None or self._held[0] != sizes:
            self._held = (sizes, optimizer_parameter_ids(self.ctx.optimizer) or set())
        return self._held[1]

    def on_step(self, loss):
        if self._in_step:   # Monitor.step from a global step post-hook, before this one's
            self._leave_step()
        elif not self._step_hooked:      # no step hooks: Monitor.step closes the window
            self._close_window()
        return False

    def _close_window(self):
        passes, discarded = self._passes - self._served, self._discarded
        clips, how = self._clips, self._how
        self._reset_window()
        contract = self.contract
        if clips:
            contract.clipped_windows += 1
            if all(reason is not None for _, reason, _, _ in clips):
                function, reason, tensors, with_gradient = clips[-1]
                contract.ineffective_count += 1
                if len(contract.ineffective) < KEPT:
                    contract.ineffective.append(IneffectiveClip(
                        self.ctx.step, function, reason, tensors, with_gradient))
        if passes <= 0:
            return
        contract.windows += 1
        contract.accumulating += passes > 1
        if discarded:
            contract.discarding_count += 1
            if len(contract.discarding) < KEPT:
                contract.discarding.append(DiscardingWindow(self.ctx.step, passes, discarded,
                                                            how or "set to None"))

    def contribute(self):
        if self._error is not None:
            raise self._error

    def signals(self):
        return (self.contract.frozen(),)

    def close(self):
        if self._listening:
            self._listening = False
            CLIPPING_PATCH.unlisten(self)
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

