"""``gradhunt preflight path/to/file.py:factory``: the preflight checklist on a user's model.

The factory is a function of no arguments in that file returning one of
``(model, loss_fn, (inputs, targets))``, ``(model, loss_fn, inputs, targets)``, or a dict with
``model``, ``loss_fn``, ``inputs`` and ``targets`` (or ``batch``) and, optionally,
``optimizer`` and ``train_step``. Exit code 0 when every item passes, 1 when one fails, 2 for
a factory that cannot be loaded.
"""
import contextlib
import importlib.util
import json
import sys
from pathlib import Path

from ..errors import DiagnosticsError, require

DEFAULT_FACTORY = "factory"
OPTIONAL = ("optimizer", "train_step")


def add_preflight_command(subparsers):
    parser = subparsers.add_parser(
        "preflight", help="run the pre-training checklist on a model factory",
        description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("target", metavar="FILE.py[:FACTORY]",
                        help=f"a Python file and the factory in it (default: {DEFAULT_FACTORY})")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run_preflight_command)


def run_preflight_command(args):
    from .preflight import preflight

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
    module = _import_file(path)
    factory = getattr(module, name, None)
    require(callable(factory), "FACTORY", f"a function named {name!r} in {path}",
            "nothing callable by that name")
    with _on_path(path.parent):
        made = factory()
    return _arguments(made, f"{path}:{name}")


def _split(target):
    head, sep, tail = target.rpartition(":")
    if sep and tail.isidentifier():
        return Path(head), tail
    return Path(target), DEFAULT_FACTORY


def _import_file(path):
    spec = importlib.util.spec_from_file_location(f"gradhunt_factory_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    with _on_path(path.parent):
        spec.loader.exec_module(module)
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
