"""``TrainingWatch``: a Monitor on every torch model whose optimizer steps, no loop edits.

What a script does not hand over is found through torch's global hooks, all removed on exit:

- the models: a global forward pre-hook and forward hook keep the *top-level* modules, those
  called while no other module's forward is running (``model(x)``, not its layers);
- the optimizers: a global optimizer-step post-hook. At an optimizer's first step, every
  top-level module holding some of its parameters gets a Monitor (a module inside another
  such module does not), so the Monitor watches from the second step on;
- the loss: ``torch.autograd.backward`` (which ``loss.backward()`` calls) is wrapped to keep
  the last one-element tensor a backward ran from; with a ``GradScaler`` the loss before
  ``scaler.scale(loss)`` is taken, and that scaler is handed to the Monitor (``scaler=``).
  An optimizer step hands the last loss to ``Monitor.step``
  when a backward ran since that optimizer's previous step, so gradient accumulation (several
  backwards per step) gives the last micro-batch's loss, and two optimizers stepping after
  one backward both get it.

A failure inside the watch never stops the script: that Monitor is closed and the failure is
kept in ``problems``.
"""
import importlib
import numbers
import weakref
from dataclasses import dataclass
from pathlib import Path

from ..errors import require
from ..monitor import JSONLSink, Monitor
from ..monitor.settings import DEFAULT_EVERY


class TrainingWatch:
    """Attach Monitors to the models a torch script trains, for as long as the ``with`` lasts.

    Args:
        every: sampling period handed to each Monitor.
        jsonl: a path: the first Monitor writes its rows there, the k-th to ``stem.k.suffix``.
        on_finding: called with ``(label, finding)`` for each new finding.

    Example::

        with TrainingWatch() as watch:
            runpy.run_path("train.py", run_name="__main__")
        for label, report in watch.reports():
            print(label, report)
    """

    def __init__(self, *, every=DEFAULT_EVERY, jsonl=None, on_finding=None):
        require(isinstance(every, numbers.Integral) and not isinstance(every, bool)
                and every >= 1, "every", "an integer >= 1", repr(every))
        require(jsonl is None or isinstance(jsonl, (str, Path)), "jsonl", "a path or None",
                type(jsonl).__name__)
        require(on_finding is None or callable(on_finding), "on_finding",
                "a callable taking (label, finding), or None", type(on_finding).__name__)
        self.every, self.on_finding = every, on_finding
        self.jsonl = None if jsonl is None else Path(jsonl)
        self.watched = []          # [(label, Monitor)] in the order they were attached
        self.problems = []         # what could not be watched, in words
        self._roots = {}           # id(module) -> weakref of a top-level module
        self._depth = 0
        self._by_optimizer = {}    # id(optimizer) -> _Stepping
        self._watched_models = {}  # id(model) -> weakref of a model that has a Monitor
        self._loss, self._losses_seen = None, 0   # the last backward's loss, and a count
        self._scaled = {}          # id(scaled loss) -> (weakref(scaled loss), loss)
        self._scaler = None        # weakref of the last GradScaler that scaled a loss
        self._undo = []

    # ---------------------------------------------------------------- lifecycle
    def __enter__(self):
        import torch

        modules = importlib.import_module("torch.nn.modules.module")
        optimizers = importlib.import_module("torch.optim.optimizer")
        try:
            self._undo.append(modules.register_module_forward_pre_hook(
                self._on_module_enter).remove)
            self._undo.append(modules.register_module_forward_hook(
                self._on_module_exit, always_call=True).remove)
            self._undo.append(optimizers.register_optimizer_step_post_hook(
                self._on_optimizer_step).remove)
            self._patch(torch.autograd, "backward", self._wrap_backward)
            self._patch(torch.amp.GradScaler, "scale", self._wrap_scale)
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        """Remove every hook and patch and close the Monitors; idempotent."""
        try:
            self._restore()
        finally:
            for _, monitor in self.watched:
                monitor.close()

    def reports(self):
        """``[(label, MonitorReport)]``, one per watched model."""
        return [(label, monitor.report()) for label, monitor in self.watched]

    def _patch(self, owner, name, wrap):
        original = getattr(owner, name)
        setattr(owner, name, wrap(original))
        self._undo.append(lambda: setattr(owner, name, original))

    def _restore(self):
        undo, self._undo = self._undo, []
        for action in reversed(undo):
            action()

    # -------------------------------------------------------------------- hooks
    def _on_module_enter(self, module, args):
        if self._depth == 0 and not _holds(self._roots, module):
            self._roots[id(module)] = weakref.ref(module)
        self._depth += 1

    def _on_module_exit(self, module, args, output):
        self._depth = max(self._depth - 1, 0)

    def _wrap_backward(self, original):
        def backward(tensors, *args, **kwargs):
            self._note_loss(tensors)
            return original(tensors, *args, **kwargs)
        return backward

    def _wrap_scale(self, original):
        def scale(scaler, outputs):
            scaled = original(scaler, outputs)
            self._scaler = weakref.ref(scaler)
            if _is_scalar_tensor(outputs) and _is_scalar_tensor(scaled):
                self._scaled = {id(scaled): (weakref.ref(scaled), outputs)}
            return scaled
        return scale

    def _note_loss(self, tensors):
        if isinstance(tensors, (list, tuple)) and len(tensors) == 1:
            tensors = tensors[0]
        if not _is_scalar_tensor(tensors):
            return
        ref, unscaled = self._scaled.get(id(tensors), (None, None))
        self._loss = unscaled if ref is not None and ref() is tensors else tensors
        self._losses_seen += 1

    def _on_optimizer_step(self, optimizer, args, kwargs):
        known = self._by_optimizer.get(id(optimizer))
        if known is None or known.optimizer() is not optimizer:
            try:
                monitors = self._attach(optimizer)
            except Exception as error:   # an optimizer of an unexpected shape: not watched
                self.problems.append(f"{type(optimizer).__name__}: not watched: "
                                     f"{type(error).__name__}: {error}")
                monitors = []
            self._by_optimizer[id(optimizer)] = _Stepping(weakref.ref(optimizer), monitors,
                                                          self._losses_seen)
            return
        if known.losses_seen == self._losses_seen:   # no backward since its last step
            return
        known.losses_seen = self._losses_seen
        for monitor in list(known.monitors):
            try:
                monitor.step(self._loss)
            except Exception as error:   # the script goes on; this model is no longer watched
                self._give_up(monitor, f"stopped watching: {type(error).__name__}: {error}")

    # ----------------------------------------------------------------- attaching
    def _attach(self, optimizer):
        held = {id(p) for group in optimizer.param_groups for p in group["params"]}
        self._roots = {key: ref for key, ref in self._roots.items() if ref() is not None}
        roots = [m for m in (ref() for ref in self._roots.values()) if m is not None]
        owners = [m for m in roots if any(id(p) in held for p in m.parameters())]
        inner = {id(sub) for m in owners for sub in m.modules() if sub is not m}
        owners = [m for m in owners if id(m) not in inner]
        name = type(optimizer).__name__
        if not owners:
            self.problems.append(f"{name}: no module called before its first step holds its "
                                 f"parameters, so nothing is watched for it")
            return []
        monitors = []
        for model in owners:
            if _holds(self._watched_models, model):
                self.problems.append(f"{type(model).__name__} is stepped by a second optimizer "
                                     f"({name}); it is watched with its first one only")
                continue
            called = _name_in_user_code(model)
            label = (f"{called} ({type(model).__name__}, {name})" if called
                     else f"{type(model).__name__} ({name})")
            same = sum(1 for taken, _ in self.watched if taken.split(" #")[0] == label)
            if same:   # a GAN's generator and discriminator: two Sequentials with two Adams
                label += f" #{same + 1}"
            try:
                monitor = Monitor(model, optimizer, every=self.every, sinks=self._sinks(),
                                  on_finding=self._finding_callback(label),
                                  scaler=self._scaler_in_use())
            except Exception as error:
                self.problems.append(f"{label}: not watched: {type(error).__name__}: {error}")
                continue
            self._watched_models[id(model)] = weakref.ref(model)
            self.watched.append((label, monitor))
            monitors.append(monitor)
        return monitors

    def _scaler_in_use(self):
        """The GradScaler the loop scaled its losses with (the Monitor then judges gradients
        unscaled and sees clipping before ``unscale_``), or None."""
        scaler = self._scaler() if self._scaler is not None else None
        return scaler if scaler is not None and scaler.is_enabled() else None

    def _sinks(self):
        if self.jsonl is None:
            return ()
        k = len(self.watched)
        path = self.jsonl if k == 0 else self.jsonl.with_name(
            f"{self.jsonl.stem}.{k}{self.jsonl.suffix}")
        return (JSONLSink(path),)

    def _finding_callback(self, label):
        if self.on_finding is None:
            return None
        return lambda finding: self.on_finding(label, finding)

    def _give_up(self, monitor, reason):
        label = next(lbl for lbl, m in self.watched if m is monitor)
        self.problems.append(f"{label}: {reason}")
        monitor.close()
        for known in self._by_optimizer.values():
            if monitor in known.monitors:
                known.monitors.remove(monitor)


@dataclass
class _Stepping:
    """An optimizer seen stepping: its Monitors and the loss count at its last step."""

    optimizer: weakref.ref
    monitors: list
    losses_seen: int


def _holds(refs, obj):
    """Whether ``refs`` (id -> weakref) holds ``obj`` itself, not a dead object of the same id."""
    ref = refs.get(id(obj))
    return ref is not None and ref() is obj


def _is_scalar_tensor(value):
    import torch

    return isinstance(value, torch.Tensor) and value.numel() == 1


def _name_in_user_code(model, *, depth=40):
    """The name the user's code calls ``model`` by where its optimizer steps: a variable
    (``netG``) or an attribute of one (``self.generator``, ``trainer.model``), read from the
    first frames up the stack that are not torch's or gradhunt's; None when none holds it."""
    import sys

    frame = sys._getframe(1)
    for _ in range(depth):
        if frame is None:
            return None
        module = str(frame.f_globals.get("__name__", ""))
        if module.split(".")[0] not in _LIBRARIES:
            found = _name_in(frame.f_locals, model) or _name_in(frame.f_globals, model)
            if found:
                return found
        frame = frame.f_back
    return None


_LIBRARIES = {"torch", "diagnostics", "gradhunt", "lightning", "pytorch_lightning",
              "transformers", "accelerate", "importlib", "runpy", "contextlib"}


def _name_in(namespace, model):
    """A name of ``namespace`` bound to ``model``, or ``name.attribute`` one level down."""
    for name, value in list(namespace.items()):
        if value is model and not name.startswith("__"):
            return name
    for name, value in list(namespace.items()):
        attributes = getattr(value, "__dict__", None)
        if not isinstance(attributes, dict) or isinstance(value, type) or name.startswith("__"):
            continue
        for attribute, inner in list(attributes.items()):
            if inner is model:
                return f"{name}.{attribute}"
    return None
