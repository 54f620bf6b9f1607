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
  one backward, both get it;
- loops without an optimizer (``hand_updates.py``): a top-level model that no optimizer holds
  parameters of, called again after a backward reached its parameters and they changed, ended
  an iteration by hand: at the first such call it gets a Monitor with ``optimizer=None``, at
  each later one that Monitor's ``step`` (and once more at exit for the last iteration). That
  ``step`` runs before the call's own forward pre-hooks, through ``nn.Module.__call__``
  wrapped while such a Monitor exists: inside a pre-hook it would add and remove the
  model's hooks while torch runs the list of them it took;
- workers started with ``torch.multiprocessing.spawn`` (``spawned.py``): each runs under a
  watch of its own; their reports come back at exit (``worker_reports``), a DDP job's as one
  report with the findings merged over its ranks.

A failure inside the watch never stops the script: that Monitor is closed and the failure is
kept in ``problems``.
"""
import importlib
import numbers
import weakref
from dataclasses import dataclass
from pathlib import Path

from ..errors import require
from ..findings import Finding
from ..monitor import JSONLSink, Monitor
from ..monitor.guard import GUARD_MODES
from ..monitor.settings import DEFAULT_EVERY
from .hand_updates import HandUpdates
from .spawned import SpawnedWorkers
from .uncalled import module_holding


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

    def __init__(self, *, every=DEFAULT_EVERY, jsonl=None, on_finding=None, guard=None):
        require(isinstance(every, numbers.Integral) and not isinstance(every, bool)
                and every >= 1, "every", "an integer >= 1", repr(every))
        require(jsonl is None or isinstance(jsonl, (str, Path)), "jsonl", "a path or None",
                type(jsonl).__name__)
        require(on_finding is None or callable(on_finding), "on_finding",
                "a callable taking (label, finding), or None", type(on_finding).__name__)
        require(guard in GUARD_MODES, "guard", f"one of {GUARD_MODES}", repr(guard))
        self.every, self.on_finding, self.guard = every, on_finding, guard
        self.jsonl = None if jsonl is None else Path(jsonl)
        self.watched = []          # [(label, Monitor)] in the order they were attached
        self.problems = []         # what could not be watched, in words
        self.unwatched = []        # OPTIMIZER_NOT_WATCHED findings: optimizers not watched
        self._roots = {}           # id(module) -> weakref of a top-level module
        self._depth = 0
        self._by_optimizer = {}    # id(optimizer) -> _Stepping
        self._watched_models = {}  # id(model) -> weakref of a model that has a Monitor
        self._loss, self._losses_seen = None, 0   # the last backward's loss, and a count
        self._scaled = {}          # id(scaled loss) -> (weakref(scaled loss), loss)
        self._scaler = None        # weakref of the last GradScaler that scaled a loss
        self._held = set()         # ids of the parameters the optimizers seen so far hold
        self._stepping = {}        # id(optimizer) -> weakref, from its first step's start
        self._hand = HandUpdates()
        self._by_hand = {}         # id(model) -> its Monitor, for models updated by hand
        self.by_hand = set()       # labels of the Monitors of loops without an optimizer
        self._call_wrapped = False
        self.spawned = SpawnedWorkers(every)
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
            self._undo.append(optimizers.register_optimizer_step_pre_hook(
                self._on_optimizer_pre_step).remove)
            self._undo.append(optimizers.register_optimizer_step_post_hook(
                self._on_optimizer_step).remove)
            self._patch(torch.autograd, "backward", self._wrap_backward)
            self._patch(torch.amp.GradScaler, "scale", self._wrap_scale)
            self.spawned.patch(self._patch)
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
            self._end_last_hand_iterations()
        finally:
            for _, monitor in self.watched:
                monitor.close()
            self._collect_workers()

    def _collect_workers(self):
        try:
            self.spawned.collect()
        except Exception as error:   # the script's own result stands
            self.problems.append(f"the spawned workers' reports could not be read: "
                                 f"{type(error).__name__}: {error}")
        self.problems.extend(self.spawned.problems)
        self.spawned.problems = []

    def reports(self):
        """``[(label, MonitorReport)]``, one per watched model."""
        return [(label, monitor.report()) for label, monitor in self.watched]

    def worker_reports(self):
        """``[(label, report text, findings)]`` of the workers started with spawn, read at
        exit: a process group's once (its lowest rank's, findings merged over the ranks)."""
        return self.spawned.shown()

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
        if self._depth == 0:
            if not _holds(self._roots, module):
                self._roots[id(module)] = weakref.ref(module)
            if id(module) not in self._by_hand:   # (those: at their __call__, see below)
                self._on_top_level_call(module)
        self._depth += 1

    def _on_module_exit(self, module, args, output):
        self._depth = max(self._depth - 1, 0)

    def _wrap_backward(self, original):
        def backward(tensors, *args, **kwargs):
            self._note_loss(tensors)
            candidates = before = None
            if self._hand is not None:
                try:
                    candidates = self._hand.candidates(self._live_roots(), self._held)
                    before = self._hand.gradients(candidates)
                except Exception as error:
                    self._hand_failed(error)
            result = original(tensors, *args, **kwargs)
            if self._hand is not None and candidates:
                try:
                    self._hand.after_backward(candidates, before)
                except Exception as error:
                    self._hand_failed(error)
            return result
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

    def _on_optimizer_pre_step(self, optimizer, args, kwargs):
        """An optimizer's parameters are its own from its first step's start: the passes of
        a closure it evaluates (L-BFGS) move them, and that is no loop updated by hand."""
        if not _holds(self._stepping, optimizer):
            self._stepping[id(optimizer)] = weakref.ref(optimizer)
            try:
                self._held |= {id(p) for group in optimizer.param_groups
                               for p in group["params"]}
            except Exception:   # an optimizer of an unexpected shape: its post-hook says so
                pass

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
        self._held |= held
        roots = self._live_roots()
        owners = [m for m in roots if any(id(p) in held for p in m.parameters())]
        inner = {id(sub) for m in owners for sub in m.modules() if sub is not m}
        owners = [m for m in owners if id(m) not in inner]
        name = type(optimizer).__name__
        if not owners:   # its model's forward() called directly: found in the calling code
            found = module_holding(held, libraries=_LIBRARIES) if held else None
            owners = [] if found is None else [found]
        if not owners and any(_has_parameters(m) for m in roots):
            self._unwatched(optimizer, roots)
            return []
        if not owners:
            self.problems.append(f"{name}: no module called before its first step holds its "
                                 f"parameters, so nothing is watched for it")
            return []
        monitors = []
        for model in owners:
            self._stop_hand_watch(model, f"is stepped by an optimizer ({name}) from here on")
            if _holds(self._watched_models, model):
                self.problems.append(f"{type(model).__name__} is stepped by a second optimizer "
                                     f"({name}); it is watched with its first one only")
                continue
            label = self._label(model, name)
            try:
                monitor = Monitor(model, optimizer, every=self.every, sinks=self._sinks(),
                                  on_finding=self._finding_callback(label),
                                  scaler=self._scaler_in_use(), guard=self.guard)
            except Exception as error:
                self.problems.append(f"{label}: not watched: {type(error).__name__}: {error}")
                continue
            self._watched_models[id(model)] = weakref.ref(model)
            self.watched.append((label, monitor))
            monitors.append(monitor)
        return monitors

    def _unwatched(self, optimizer, roots):
        """OPTIMIZER_NOT_WATCHED: an optimizer steps parameters that belong to none of the
        modules the script calls (built before a layer was replaced, or over a copy): its
        steps change nothing those modules compute, and no Monitor watches it."""
        name = type(optimizer).__name__
        called = _name_in_user_code(optimizer)
        label = f"{called} ({name})" if called else name
        params = [p for group in optimizer.param_groups for p in group["params"]]
        shapes = ", ".join(str(tuple(p.shape)) for p in params[:4]) + (
            ", ..." if len(params) > 4 else "")
        models = ", ".join(dict.fromkeys(_name_in_user_code(m) or type(m).__name__
                                         for m in roots if _has_parameters(m)))
        finding = Finding(
            "OPTIMIZER_NOT_WATCHED", "warning", label,
            f"{label} stepped, but its {len(params)} parameter tensors ({shapes}) belong to "
            f"no module the script calls ({models}), so it was not watched; its steps change "
            f"nothing those modules compute: it was built over other parameters (before a "
            f"layer was replaced, or over a copy of the model)",
            "build the optimizer after the model's last change, from the parameters that "
            "should learn (e.g. after replacing the head: Optimizer([p for p in "
            "model.parameters() if p.requires_grad], ...))",
            {"optimizer": label, "parameters": len(params), "models": models})
        self.unwatched.append(finding)
        if self.on_finding is not None:
            self.on_finding(label, finding)

    def _label(self, model, stepped_by):
        called = _name_in_user_code(model)
        label = (f"{called} ({type(model).__name__}, {stepped_by})" if called
                 else f"{type(model).__name__} ({stepped_by})")
        same = sum(1 for taken, _ in self.watched if taken.split(" #")[0] == label)
        if same:   # a GAN's generator and discriminator: two Sequentials with two Adams
            label += f" #{same + 1}"
        return label

    def _live_roots(self):
        self._roots = {key: ref for key, ref in self._roots.items() if ref() is not None}
        return [m for m in (ref() for ref in self._roots.values()) if m is not None]

    # ------------------------------------------------------ loops without optimizer
    def _on_top_level_call(self, model):
        """A call of a top-level model: the end of an iteration updated by hand, if its
        parameters changed since the last backward that reached them."""
        if self._hand is None:
            return
        try:
            ended = self._hand.ended(model)
        except Exception as error:
            self._hand_failed(error)
            return
        if not ended or any(id(p) in self._held for p in model.parameters()):
            return
        monitor = self._by_hand.get(id(model))
        if monitor is None:
            self._attach_by_hand(model)
            return
        try:
            monitor.step(self._loss)
        except Exception as error:   # the script goes on; this model is no longer watched
            self._give_up(monitor, f"stopped watching: {type(error).__name__}: {error}")

    def _attach_by_hand(self, model):
        if _holds(self._watched_models, model):
            return
        label = self._label(model, "no optimizer")
        try:
            monitor = Monitor(model, None, every=self.every, sinks=self._sinks(),
                              on_finding=self._finding_callback(label))
        except Exception as error:
            self.problems.append(f"{label}: not watched: {type(error).__name__}: {error}")
            return
        self._watched_models[id(model)] = weakref.ref(model)
        self._by_hand[id(model)] = monitor
        self.by_hand.add(label)
        self.watched.append((label, monitor))
        if not self._call_wrapped:
            import torch

            self._call_wrapped = True
            self._patch(torch.nn.Module, "__call__", self._wrap_call)

    def _wrap_call(self, original):
        def __call__(module, *args, **kwargs):
            if self._depth == 0 and id(module) in self._by_hand:
                self._on_top_level_call(module)
            return original(module, *args, **kwargs)
        return __call__

    def _end_last_hand_iterations(self):
        """The script's last iteration updated by hand is followed by no call: ended here."""
        if self._hand is None:
            return
        try:
            models = self._hand.pending_ended()
        except Exception as error:
            self._hand_failed(error)
            return
        for model in models:
            monitor = self._by_hand.get(id(model))
            if monitor is not None and not any(id(p) in self._held for p in model.parameters()):
                try:
                    monitor.step(self._loss)
                except Exception as error:
                    self._give_up(monitor, f"stopped watching: {type(error).__name__}: {error}")

    def _stop_hand_watch(self, model, reason):
        monitor = self._by_hand.get(id(model))
        if monitor is not None:
            self._give_up(monitor, f"watched as updated by hand until it {reason}")

    def _hand_failed(self, error):
        """The watch of loops without an optimizer failed: turned off, the rest goes on."""
        self._hand = None
        self.problems.append(f"loops without an optimizer are no longer watched: "
                             f"{type(error).__name__}: {error}")

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
        for key, hand in list(self._by_hand.items()):
            if hand is monitor:
                del self._by_hand[key]
                self._watched_models.pop(key, None)


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


def _has_parameters(module):
    try:
        return next(iter(module.parameters()), None) is not None
    except Exception:   # a module that cannot list them holds none we can name
        return False


def _is_scalar_tensor(value):
    import torch

    return isinstance(value, torch.Tensor) and value.numel() == 1


def _name_in_user_code(model, *, depth=40):
    """The name the user's code calls ``model`` by where its optimizer steps: a variable
    (``netG``) or an attribute of one (``self.generator``, ``trainer.model``), read from the
    first frames up the stack that are not torch's or gradhunt's (a bare ``self``, inside the
    model's own method, only when no caller names it); None when none holds it."""
    import sys

    frame, itself = sys._getframe(1), None
    for _ in range(depth):
        if frame is None:
            break
        module = str(frame.f_globals.get("__name__", ""))
        if module.split(".")[0] not in _LIBRARIES:
            found = _name_in(frame.f_locals, model) or _name_in(frame.f_globals, model)
            if found == "self":   # inside the model's own method: a caller's name says more
                itself = itself or found
            elif found:
                return found
        frame = frame.f_back
    return itself


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
