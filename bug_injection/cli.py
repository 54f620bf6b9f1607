"""The ``hunt`` and ``inject`` sub-commands of ``gradhunt`` (the command is ``scenarios.cli``).

``gradhunt hunt`` plants every catalogued bug on both backends, prints the table and the
score, and exits 1 when a bug is missed or misplaced or a healthy control raises an alarm.
``gradhunt inject NAME`` plants one bug and shows the diagnosis step by step.
"""
import json
import sys

from diagnostics.backends import TORCH_MISSING, torch_installed
from diagnostics.progress import progress_bar

from .catalog import catalog, get_bug
from .models import BACKENDS


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
    parser.set_defaults(func=_hunt_command)

    parser = subparsers.add_parser(
        "inject", help="plant one bug and show the diagnosis step by step",
        description="Plant one catalogued bug into its reference model and show what was "
                    "planted, what the diagnostic reports, and where it points.")
    parser.add_argument("name", nargs="?", choices=names, metavar="NAME",
                        help="the bug: " + ", ".join(names))
    parser.add_argument("--backend", choices=BACKENDS, default="minigrad",
                        help="the backend (default: minigrad)")
    parser.add_argument("--list", action="store_true", help="list the catalogue and exit")
    parser.set_defaults(func=_inject_command)


def _hunt_command(args):
    from .hunt import hunt
    from .table import render as render_table

    if args.backend == "torch" and not torch_installed():
        print(f"gradhunt hunt --backend torch: {TORCH_MISSING}", file=sys.stderr)
        return 2
    backends = (args.backend,) if args.backend else BACKENDS
    if "torch" in backends and not torch_installed():
        print(f"{TORCH_MISSING}: hunting on minigrad only", file=sys.stderr)
        backends = ("minigrad",)
    show = False if args.json else "auto"      # a bar on a terminal, at once
    with progress_bar(None, desc="hunt", show=show, delay=0, mininterval=0) as bar:
        result = hunt(bugs=args.bug, backends=backends,
                      progress=lambda done, total, outcome: _show_progress(bar, total, outcome))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(render_table(result))
    return 0 if result.passed else 1


def _inject_command(args):
    if args.list or args.name is None:
        width = max(len(bug.name) for bug in catalog())
        for bug in catalog():
            print(f"{bug.name.ljust(width)}  {bug.kind:13}  {bug.description}")
        return 0 if args.list else 2
    if args.backend == "torch" and not torch_installed():
        print(f"gradhunt inject --backend torch: {TORCH_MISSING}", file=sys.stderr)
        return 2
    from .inject import inject, render as render_injection

    injection = inject(get_bug(args.name), args.backend)
    print(render_injection(injection))
    return 0 if injection.outcome.ok and injection.reverted else 1


def _show_progress(bar, total, outcome):
    bar.total = total
    bar.set_postfix_str(f"{outcome.name} on {outcome.backend}: {outcome.verdict}", refresh=False)
    bar.update()
