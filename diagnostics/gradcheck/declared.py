"""Declared exceptions: modules and autograd Functions whose backward is on purpose not the
derivative of their forward (a gradient reversal layer, a straight-through estimator).

A user names them with ``check_gradients(..., declared=[...])``: module names as
``named_modules()`` spells them, module classes (every instance), or autograd ``Function``
classes (the modules whose forward applies one). A wrong gradient born inside a declared
module is reported as declared (info), and the gradients upstream of it, wrong as a
consequence, do not fail the check; a wrong gradient born anywhere else still does.
"""
import contextlib

from ..errors import DiagnosticsError


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
