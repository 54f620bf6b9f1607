"""``gradhunt preflight path/to/file.py:factory``: the preflight checklist on a user's model.

The factory is a function of no arguments in that file returning one of
``(model, loss_fn, (inputs, targets))``, ``(model, loss_fn, inputs, targets)``, or a dict with
``model``, ``loss_fn``, ``inputs`` and ``targets`` (or ``batch``) and, optionally,
``optimizer``, ``train_step``, ``data`` and ``test_data`` (a Dataset or DataLoader). Exit code
0 when every item passes, 1 when one fails, 2 for a factory that cannot be loaded.

The file is read first, without running it: a factory it does not define at module level is
reported at once, with the names it does define. Then it is imported as a module (not as
``__main__``), so a training under ``if __name__ == "__main__":`` does not run; code at
module level outside such a block does.
"""
import ast
import contextlib
import importlib.util
import json
import sys
from pathlib import Path

from ...errors import DiagnosticsError, require

DEFAULT_FACTORY = "factory"
OPTIONAL = ("optimizer", "train_step", "data", "test_data")


def add_preflight_command(subparsers):
    parser = subparsers.add_parser(
        "preflight", help="run the pre-training checklist on a model factory",
        description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("target", metavar="FILE.py[:FACTORY]",
                        help=f"a Python file and the factory in it (default: {DEFAULT_FACTORY})")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run_preflight_command)


def run_preflight_command(args):
    from .runner import preflight

    try:
        arguments = load_factory(args.target)
        report = preflight(**arguments)
    except DiagnosticsError as error:
        print(f"gradhunt preflight: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict(), indent=2) if args.json else report)
    return 0 if report.passed else 1


def load_factory(target):
    """``preflight``'s keyword arguments from ``FILE.py[:FACTORY]``."""
    path, name = _split(target)
    require(path.is_file(), "FILE.py", "an existing Python file", str(path))
    defined = _module_names(path)
    if defined is not None:
        require(name in defined, "FACTORY", f"a function named {name!r} defined at module "
                f"level in {path}", "none by that name; it defines " + _listed(defined))
    module = _import_file(path)
    factory = getattr(module, name, None)
    require(callable(factory), "FACTORY", f"a function named {name!r} in {path}",
            "nothing callable by that name")
    with _on_path(path.parent):
        try:
            made = factory()
        except Exception as error:  # the user's factory: say so, quoting it
            raise DiagnosticsError(f"FACTORY: {path}:{name}() raised "
                                   f"{type(error).__name__}: {error}") from error
    return _arguments(made, f"{path}:{name}")


def _split(target):
    head, sep, tail = target.rpartition(":")
    if sep and tail.isidentifier():
        return Path(head), tail
    return Path(target), DEFAULT_FACTORY


def _module_names(path):
    """The names ``path`` binds at module level when imported (``if __name__ == "__main__":``
    blocks left out), read from its syntax tree without running it; None when a star import
    makes them unknowable."""
    source = path.read_text(encoding="utf-8", errors="replace")
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as error:
        raise DiagnosticsError(f"FILE.py: expected a Python file, got a SyntaxError at line "
                               f"{error.lineno} of {path}: {error.msg}") from error
    names = set()
    for node in _module_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.split(".")[0])
        else:
            targets = [node] if isinstance(node, ast.NamedExpr) else _targets(node)
            names.update(leaf.id for target in targets for leaf in ast.walk(target)
                         if isinstance(leaf, ast.Name))
    return names


def _module_level(body):
    """The statements of ``body`` that run on import, into if/try/with/for blocks, leaving
    out ``if __name__ == "__main__":`` (its ``else`` runs)."""
    for node in body:
        yield node
        if isinstance(node, ast.If) and _is_main_guard(node.test):
            yield from _module_level(node.orelse)
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list) and not isinstance(
                    node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from _module_level(inner)


def _targets(node):
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        return [node.target]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.optional_vars for item in node.items if item.optional_vars is not None]
    return []


def _is_main_guard(test):
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


def _listed(names, limit=12):
    shown = sorted(n for n in names if not n.startswith("_")) or sorted(names)
    if not shown:
        return "no names"
    text = ", ".join(shown[:limit])
    return text + (f" and {len(shown) - limit} more" if len(shown) > limit else "")


def _import_file(path):
    """``path`` imported under a name of its own (``__name__`` is not ``"__main__"``); an
    exception at import becomes a ``DiagnosticsError`` quoting it."""
    spec = importlib.util.spec_from_file_location(f"gradhunt_factory_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    with _on_path(path.parent):
        try:
            spec.loader.exec_module(module)
        except Exception as error:  # the user's file at import: say so, quoting it
            raise DiagnosticsError(f"FILE.py: importing {path} raised "
                                   f"{type(error).__name__}: {error}") from error
    return module


@contextlib.contextmanager
def _on_path(folder):
    """The factory's folder first on ``sys.path`` while it runs, so that its imports resolve."""
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))


def _arguments(made, where):
    expected = ("(model, loss_fn, (inputs, targets)), (model, loss_fn, inputs, targets) or a dict "
                "with model, loss_fn, inputs, targets")
    if isinstance(made, dict):
        made = dict(made)
        if "batch" in made:
            made["inputs"], made["targets"] = _pair(made.pop("batch"), where)
        missing = [key for key in ("model", "loss_fn", "inputs", "targets") if key not in made]
        unknown = [key for key in made if key not in ("model", "loss_fn", "inputs", "targets")
                   + OPTIONAL]
        require(not missing and not unknown, where, expected,
                f"a dict missing {missing} with unknown keys {unknown}")
        return made
    require(isinstance(made, (tuple, list)) and len(made) in (3, 4), where, expected,
            type(made).__name__)
    if len(made) == 3:
        inputs, targets = _pair(made[2], where)
        return {"model": made[0], "loss_fn": made[1], "inputs": inputs, "targets": targets}
    return dict(zip(("model", "loss_fn", "inputs", "targets"), made))


def _pair(batch, where):
    require(isinstance(batch, (tuple, list)) and len(batch) == 2, f"{where} batch",
            "an (inputs, targets) pair", type(batch).__name__)
    return batch[0], batch[1]
