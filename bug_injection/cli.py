"""The ``hunt`` and ``inject`` sub-commands of ``gradhunt`` (the command is ``scenarios.cli``).

``gradhunt hunt`` plants every catalogued bug on both backends, prints the table and the
score, and exits 1 when a bug is missed or misplaced or a healthy control raises an alarm.
``gradhunt inject NAME`` plants one bug and shows the diagnosis step by step. The real-world
corpus (``bug_injection.real_world``: torch, and minigrad where minigrad has the layers) runs
after the catalogue with its own table and score line (``--kind`` picks one part); ``inject``
takes its entries' names too.
"""
import json
import sys

from diagnostics.backends import TORCH_MISSING, torch_installed
from diagnostics.progress import progress_bar

from .planted.catalog import catalog, get_bug
from .reference.models import BACKENDS

KINDS = ("all", "catalogue", "real_world")


def _real_world_names():
    from .real_world import corpus
    return [entry.name for entry in corpus()]


def add_commands(subparsers):
    """Register ``hunt`` and ``inject``."""
    names = [bug.name for bug in catalog()]
    parser = subparsers.add_parser(
        "hunt", help="plant every catalogued bug and check that the diagnostics find it",
        description="Plant every catalogued bug into the reference models (minigrad and "
                    "torch), run the matching diagnostic, and check that it finds and "
                    "localizes the bug; healthy controls must stay clean.")
    parser.add_argument("--bug", action="append", choices=names, metavar="NAME",
                        help="only this bug (repeatable); see 'gradhunt inject --list'")
    parser.add_argument("--backend", choices=BACKENDS, help="only this backend")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--kind", choices=KINDS, default="all",
                        help="the planted catalogue, the real-world corpus, or both "
                             "(default; --bug narrows to the catalogue)")
    parser.set_defaults(func=_hunt_command)

    parser = subparsers.add_parser(
        "inject", help="plant one bug and show the diagnosis step by step",
        description="Plant one catalogued bug into its reference model and show what was "
                    "planted, what the diagnostic reports, and where it points.")
    real_world = _real_world_names()
    parser.add_argument("name", nargs="?", choices=names + real_world, metavar="NAME",
                        help="the bug: " + ", ".join(names) + "; real-world: "
                             + ", ".join(real_world))
    parser.add_argument("--backend", choices=BACKENDS,
                        help="the backend (default: minigrad; a real-world entry: every "
                             "backend it is reproduced on)")
    parser.add_argument("--list", action="store_true", help="list the catalogue and exit")
    parser.set_defaults(func=_inject_command)


def _hunt_command(args):
    from .hunt import hunt, render as render_table

    if args.backend == "torch" and not torch_installed():
        print(f"gradhunt hunt --backend torch: {TORCH_MISSING}", file=sys.stderr)
        return 2
    backends = (args.backend,) if args.backend else BACKENDS
    if "torch" in backends and not torch_installed():
        print(f"{TORCH_MISSING}: hunting on minigrad only", file=sys.stderr)
        backends = ("minigrad",)
    show = False if args.json else "auto"      # a bar on a terminal, at once
    result = real = None
    if args.kind in ("all", "catalogue"):
        with progress_bar(None, desc="hunt", show=show, delay=0, mininterval=0) as bar:
            result = hunt(bugs=args.bug, backends=backends,
                          progress=lambda done, total, outcome: _show_progress(
                              bar, total, f"{outcome.name} on {outcome.backend}: "
                                          f"{outcome.verdict}"))
    if args.kind == "real_world" or (args.kind == "all" and not args.bug):
        from .real_world import hunt as real_world_hunt
        with progress_bar(None, desc="real-world", show=show, delay=0, mininterval=0) as bar:
            real = real_world_hunt.hunt_real_world(
                backends=backends, progress=lambda done, total, outcome: _show_progress(
                    bar, total, f"{outcome.entry.name} on {outcome.backend}: "
                                f"{outcome.buggy.verdict}"))
    if args.json:
        data = result.to_dict() if result is not None else {}
        if real is not None:
            data["real_world"] = real.to_dict()
        print(json.dumps(data, indent=2))
    else:
        parts = [render_table(result)] if result is not None else []
        if real is not None:
            parts.append(render_table(real))
        print("\n\n".join(parts))
    return 0 if all(r.passed for r in (result, real) if r is not None) else 1


def _inject_command(args):
    if args.list or args.name is None:
        width = max(len(bug.name) for bug in catalog())
        for bug in catalog():
            print(f"{bug.name.ljust(width)}  {bug.kind:13}  {bug.description}")
        from .real_world import corpus
        for entry in corpus():
            print(f"{entry.name.ljust(width)}  {'real-world':13}  {entry.root_cause}")
        return 0 if args.list else 2
    if args.name in _real_world_names():
        return _inject_real_world(args.name, args.backend)
    backend = args.backend or "minigrad"
    if backend == "torch" and not torch_installed():
        print(f"gradhunt inject --backend torch: {TORCH_MISSING}", file=sys.stderr)
        return 2
    from .hunt.inject import inject, render as render_injection

    injection = inject(get_bug(args.name), backend)
    print(render_injection(injection))
    return 0 if injection.outcome.ok and injection.reverted else 1


def _inject_real_world(name, backend=None):
    """The entry on ``backend``, or on every backend it is reproduced on (torch's if
    installed)."""
    from .real_world import get_entry
    from .real_world.hunt import render_entry, run_pair

    entry = get_entry(name)
    if backend is not None and backend not in entry.backends:
        print(f"gradhunt inject {name} --backend {backend}: this entry is reproduced on "
              f"{', '.join(entry.backends)} only", file=sys.stderr)
        return 2
    backends = [b for b in ((backend,) if backend else entry.backends)
                if b != "torch" or torch_installed()]
    if not backends:
        print(f"gradhunt inject {name}: {TORCH_MISSING}", file=sys.stderr)
        return 2
    outcomes = [run_pair(entry, b) for b in backends]
    print("\n\n".join(render_entry(entry, o.buggy, o.fixed) for o in outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


def _show_progress(bar, total, text):
    bar.total = total
    bar.set_postfix_str(text, refresh=False)
    bar.update()
