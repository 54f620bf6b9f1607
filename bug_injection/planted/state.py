"""Snapshots of everything a plant may touch, and the differences between two of them.

``snapshot(bench)`` records the bench's fields, the model's parameters (values and Python
attributes), buffers, modes, children and per-module attributes (a swapped ``forward``), and
the namespaces of minigrad's ops and functional modules (the op classes' ``forward`` and
``backward``, module-level functions), plus ``torch.nn.functional`` when torch is loaded.
``changes(before, after)`` lists what differs, in words: ``gradhunt inject`` shows what a plant
changed, and the tests check that nothing differs once the plant is gone.
"""
import importlib
import pkgutil
import sys
from dataclasses import dataclass

import numpy as np

import minigrad.functional
import minigrad.ops

_REGISTRIES = ("_parameters", "_buffers", "_modules", "training")
_BENCH_FIELDS = ("model", "loss_fn", "optimizer", "train_x", "train_y", "test_x", "test_y",
                 "loop")


@dataclass(frozen=True)
class State:
    bench: dict            # field -> object
    parameters: dict       # name -> (values, Python attribute names)
    buffers: dict          # name -> values
    training: dict         # module name -> bool
    children: dict         # module name -> ((child name, child), ...)
    attributes: dict       # module name -> {attribute: object}, registries left out
    namespaces: dict       # "module" or "module.Class" -> {name: object}


def snapshot(bench):
    """The state of ``bench`` and of the op namespaces a plant may patch."""
    modules = list(bench.model.named_modules())
    loss_fn = bench.loss_fn
    if not any(module is loss_fn for _, module in modules):
        modules.append(("<loss_fn>", loss_fn))
    return State(
        bench={name: getattr(bench, name) for name in _BENCH_FIELDS},
        parameters={name: (bench.array(p), frozenset(vars(p))) for name, p in
                    bench.model.named_parameters()},
        buffers={name: bench.array(b) for name, b in bench.model.named_buffers()
                 if b is not None},
        training={name: bool(m.training) for name, m in modules},
        children={name: tuple(m._modules.items()) for name, m in modules},
        attributes={name: {k: v for k, v in vars(m).items() if k not in _REGISTRIES
                           and not k.endswith("hooks")} for name, m in modules},
        namespaces=_namespaces(),
    )


def changes(before, after, *, values=True):
    """What differs between two snapshots, one line per difference (empty when nothing).

    ``values=False`` leaves out parameter and buffer values and train/eval modes, which a
    diagnostic that trains the model changes by design, and keeps the patches.
    """
    lines = []
    for field, value in before.bench.items():
        if after.bench[field] is not value:
            lines.append(_bench_change(field, value, after.bench[field]))
    for name, (old_values, attrs) in before.parameters.items():
        new_values, new_attrs = after.parameters[name]
        if values and not np.array_equal(old_values, new_values, equal_nan=True):
            lines.append(f"parameter {name}: values changed")
        for attr in sorted(new_attrs - attrs):
            lines.append(f"parameter {name}: attribute {attr} added")
        for attr in sorted(attrs - new_attrs):
            lines.append(f"parameter {name}: attribute {attr} removed")
    for name, old_values in before.buffers.items():
        if values and not np.array_equal(old_values, after.buffers[name], equal_nan=True):
            lines.append(f"buffer {name}: values changed")
    for name, mode in before.training.items():
        if values and after.training.get(name) != mode:
            lines.append(f"module {_label(name)}: training mode {mode} -> {after.training[name]}")
    for name, children in before.children.items():
        lines += [f"module {_label(name)}: child {child} replaced by "
                  f"{type(new).__name__}" for (child, old), (_, new)
                  in zip(children, after.children.get(name, ())) if new is not old]
    for name, attributes in before.attributes.items():
        lines += _dict_changes(f"module {_label(name)}", attributes, after.attributes[name])
    for space, names in before.namespaces.items():
        lines += _dict_changes(space, names, after.namespaces[space])
    return lines


def _namespaces():
    """``{"minigrad.ops.linalg": {...}, "minigrad.ops.linalg.Linear": {...}, ...}``."""
    modules = [importlib.import_module(f"minigrad.ops.{info.name}")
               for info in pkgutil.iter_modules(minigrad.ops.__path__)]
    modules.append(minigrad.functional)
    if "torch" in sys.modules:
        modules.append(importlib.import_module("torch.nn.functional"))
    spaces = {}
    for module in modules:
        spaces[module.__name__] = _public(vars(module))
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                spaces[f"{module.__name__}.{value.__name__}"] = _public(vars(value))
    return spaces


def _public(namespace):
    """``namespace`` without dunder entries (``__warningregistry__`` comes and goes)."""
    return {k: v for k, v in namespace.items() if not (k.startswith("__") and k.endswith("__"))}


def _dict_changes(owner, before, after):
    lines = []
    for key in sorted(set(before) | set(after), key=str):
        if key not in after:
            lines.append(f"{owner}.{key}: removed")
        elif key not in before:
            lines.append(f"{owner}.{key}: added ({_describe(after[key])})")
        elif after[key] is not before[key]:
            lines.append(f"{owner}.{key}: replaced ({_describe(after[key])})")
    return lines


def _bench_change(field, old, new):
    if field == "loop":
        differing = [f"{k} {getattr(old, k)} -> {getattr(new, k)}" for k in vars(old)
                     if getattr(old, k) != getattr(new, k)]
        return f"bench.loop: {', '.join(differing) or 'replaced'}"
    shape = getattr(new, "shape", None)
    detail = f" (shape {tuple(shape)})" if shape is not None else f" ({type(new).__name__})"
    return f"bench.{field}: replaced{detail}"


def _describe(value):
    function = getattr(value, "__func__", value)
    name = getattr(function, "__qualname__", type(value).__name__)
    return name.replace(".<locals>", "")


def _label(name):
    return "(root)" if name == "" else name
