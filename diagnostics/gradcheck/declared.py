"""Declared exceptions: modules and autograd Functions whose backward is on purpose not the
derivative of their forward (a gradient reversal layer, a straight-through estimator).

A user names them with ``check_gradients(..., declared=[...])``: module names as
``named_modules()`` spells them, module classes (every instance), or autograd ``Function``
classes (the modules whose forward applies one). A wrong gradient born inside a declared
module is reported as declared (info); a wrong gradient born anywhere else still fails.

The gradients upstream of a declared module are judged against its declared backward: in
the finite differences for anything outside the module, each of its calls stands in for a
``Surrogate``, its recorded output plus the linear map its backward gave (the gradient it
passed to each input, dotted with how far that input moved). The surrogate's derivative is
the declared backward, so a healthy layer upstream of a straight-through estimator agrees
with finite differences, and a wrong one is found. A call whose output is computed from more
than its recorded inputs (another module's weights, a tensor kept from earlier) has no
surrogate; the gradients upstream of it are then not judged.
"""
import contextlib
from dataclasses import dataclass

from ..errors import DiagnosticsError
from .points import INPUT, OUTPUT


@dataclass(frozen=True)
class Surrogate:
    """One module call replaced by its first-order model around the recorded pass:
    ``outputs``: output index -> recorded value; ``inputs``: input index -> (recorded value,
    the gradient the module's backward passed to it)."""

    module: str
    call: int
    outputs: dict
    inputs: dict


def check_declared(backend, declared):
    """``(module names, module classes, Function classes)``; a ``DiagnosticsError`` naming
    ``declared`` for anything else."""
    if declared is None:
        declared = ()
    if isinstance(declared, (str, type)):
        declared = (declared,)
    if not isinstance(declared, (tuple, list, set, frozenset)):
        raise DiagnosticsError(f"declared: expected a list of module names, module classes or "
                               f"autograd Function classes, got {type(declared).__name__}")
    modules = dict(backend.named_modules())
    names, module_classes, functions = set(), [], []
    for item in declared:
        if isinstance(item, str):
            if item not in modules:
                shown = ", ".join(repr(n) for n in list(modules)[1:6])
                raise DiagnosticsError(f"declared: expected names of the model's modules (as "
                                       f"named_modules() spells them: {shown}, ...), got {item!r}")
            names.add(item)
        elif isinstance(item, type) and _is_function_class(item):
            functions.append(item)
        elif isinstance(item, type) and any(isinstance(m, item) for m in modules.values()):
            module_classes.append(item)
        else:
            raise DiagnosticsError(f"declared: expected module names, classes of the model's "
                                   f"modules or autograd Function classes, got {item!r}")
    return names, tuple(module_classes), tuple(functions)


def declared_modules(backend, names, module_classes, hosts):
    """The copy's module names that are declared: named, of a declared class, or hosting a
    declared Function (``hosts``, recorded by ``function_hosts``)."""
    found = set(names) | set(hosts)
    found |= {name for name, module in backend.named_modules()
              if module_classes and isinstance(module, module_classes)}
    return found


def surrogates(instrument, points, analytic, modules, parameter_ids):
    """``(module, call) -> Surrogate`` for the calls of the outermost ``modules`` whose
    outputs the graph computes only from their inputs and from what lies inside them
    (``parameter_ids``: parameter name -> id of the copy's parameter)."""
    outer = {m for m in modules if not any(o != m and is_declared(m, {o}) for o in modules)}
    found = {}
    for name in outer:
        for call in sorted({p.call for p in points if p.module == name}):
            own = [p for p in points if p.module == name and p.call == call]
            outputs = [p.key for p in own if p.kind == OUTPUT]
            inputs = [p.key for p in own if p.kind == INPUT]
            if not outputs:
                continue
            reached, leaves = instrument.reach(outputs, inputs)
            inside = {p.key for p in points if is_declared(p.module, {name})}
            foreign = {pid for pname, pid in parameter_ids.items()
                       if not is_declared(pname.rpartition(".")[0], {name})}
            if not reached <= inside or leaves & foreign:
                continue
            found[(name, call)] = Surrogate(
                name, call, {key[3]: analytic.point_values[key] for key in outputs},
                {key[3]: (analytic.point_values[key], analytic.point_gradients[key])
                 for key in inputs})
    return found


def surrogate_exempt(names, *, parameter=None, point=None):
    """The surrogate module a run perturbing ``parameter`` or ``point`` must run as it is:
    the one holding the parameter, or the point (its own output aside, which the surrogate
    gives exactly)."""
    if parameter is not None:
        module = parameter.rpartition(".")[0]
    elif point is not None:
        module = point.module
        if point.kind == OUTPUT and module in names:
            return None
    else:
        return None
    return next((name for name in names if is_declared(module, {name})), None)


def is_declared(module, declared):
    """True when ``module`` is a declared module or lies inside one."""
    return any(module == name or (name and module.startswith(name + "."))
               for name in declared)


@contextlib.contextmanager
def function_hosts(functions, instrument, hosts):
    """While the block runs, each call of a declared Function's ``apply`` adds the innermost
    module running it to ``hosts``; the classes are put back as they were on exit."""
    patched = []
    try:
        for cls in functions:
            patched.append((cls, cls.__dict__.get("apply")))
            cls.apply = classmethod(_recording_apply(cls.apply, instrument, hosts))
        yield hosts
    finally:
        for cls, original in reversed(patched):
            if original is None:
                delattr(cls, "apply")
            else:
                cls.apply = original


def _recording_apply(bound_apply, instrument, hosts):
    def apply(cls, *args, **kwargs):
        module = instrument.current_module
        if module is not None:
            hosts.add(module)
        return bound_apply(*args, **kwargs)
    return apply


def _is_function_class(cls):
    """An autograd Function class of torch or minigrad (static forward/backward and apply)."""
    names = {base.__module__.split(".")[0] + "." + base.__name__ for base in cls.__mro__}
    return bool(names & {"torch.Function", "minigrad.Function"}) and hasattr(cls, "apply")
