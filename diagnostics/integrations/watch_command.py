"""``gradhunt watch script.py [args...]`` / ``gradhunt watch -m module [args...]``.

Runs an unchanged training script in this process (as ``python script.py`` or
``python -m module`` would) inside a ``TrainingWatch``, then prints one Monitor report per
watched model to stderr (the script's stdout stays its own), also after Ctrl-C or an
exception in the script.

Exit code: the script's own when it failed (130 after Ctrl-C); otherwise 1 when ``--fail-on``
is given and a finding of that severity or worse was made, else 0.
"""
import argparse
import runpy
import sys
import traceback
from pathlib import Path

from ..backends import TORCH_MISSING, torch_installed
from ..findings import SEVERITIES
from ..monitor.settings import DEFAULT_EVERY
from ..monitor.guard import GuardStopped
from .watch import TrainingWatch


def add_watch_command(subparsers):
    parser = subparsers.add_parser(
        "watch", help="run a training script unchanged, with a Monitor on every model it trains",
        description="Run a torch training script unchanged with a Monitor attached to every "
                    "model whose optimizer steps; print the reports at exit.")
    parser.add_argument("--every", type=int, default=DEFAULT_EVERY, metavar="N",
                        help=f"sample every N-th optimizer step (default {DEFAULT_EVERY})")
    parser.add_argument("--out", type=Path, metavar="PATH",
                        help="write the sampled steps as JSON lines (a second model to "
                             "rows.1.jsonl for rows.jsonl, ...)")
    parser.add_argument("--fail-on", choices=("error", "warning"),
                        help="exit 1 when a finding of this severity or worse was made")
    parser.add_argument("--guard", choices=("skip", "stop"),
                        help="act on an optimizer step with NaN/inf or spiking gradients: "
                             "skip keeps it from being applied, stop ends the run before it "
                             "(Monitor(guard=...))")
    parser.add_argument("-m", dest="as_module", action="store_true",
                        help="the target is a module name, run as `python -m`")
    parser.add_argument("target", nargs=argparse.REMAINDER, metavar="script.py|module [args...]",
                        help="the script (or, with -m, the module) and its arguments")
    parser.set_defaults(func=run_watch)


def run_watch(args):
    if not args.target:
        print("gradhunt watch: expected a script (or -m module) to run", file=sys.stderr)
        return 2
    if not torch_installed():
        print(f"gradhunt watch: {TORCH_MISSING}", file=sys.stderr)
        return 2
    if args.every < 1:
        print("gradhunt watch: --every must be a positive integer", file=sys.stderr)
        return 2
    target, script_args = args.target[0], args.target[1:]
    if not args.as_module and not Path(target).is_file():
        print(f"gradhunt watch: no such script: {target}", file=sys.stderr)
        return 2
    watch = TrainingWatch(every=args.every, jsonl=args.out, on_finding=_alert,
                          guard=args.guard)
    with watch:
        code = _run_target(target, script_args, as_module=args.as_module)
    _print_reports(watch)
    if code == 0 and args.fail_on is not None:
        worst = SEVERITIES.index(args.fail_on)
        found = [f for _, report in watch.reports() for f in report.findings]
        found += [f for _, _, findings in watch.worker_reports() for f in findings]
        found += watch.unwatched
        if any(SEVERITIES.index(f.severity) >= worst for f in found):
            code = 1
    return code


def _run_target(target, script_args, *, as_module):
    """Run the script as ``__main__`` with its own argv and sys.path[0]; its exit code."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [target, *script_args]
    sys.path.insert(0, "" if as_module else str(Path(target).resolve().parent))
    try:
        if as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
        return 0
    except SystemExit as exit_:
        return _exit_code(exit_.code)
    except KeyboardInterrupt:
        print("\ngradhunt watch: interrupted; the reports so far follow", file=sys.stderr)
        return 130
    except GuardStopped as stopped:
        print(f"gradhunt watch: {stopped}; the reports up to there follow", file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc()
        print("gradhunt watch: the script raised; the reports up to there follow",
              file=sys.stderr)
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def _exit_code(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _alert(label, finding):
    if finding.is_alarm:
        print(f"gradhunt watch: {label}: [{finding.severity}] {finding.code}", file=sys.stderr)


def _print_reports(watch):
    workers = watch.worker_reports()
    if not watch.watched and not workers:
        print("\ngradhunt watch: no model was watched (no torch optimizer stepped twice, and "
              "no model's parameters changed after a backward)", file=sys.stderr)
    for label, report in watch.reports():
        start = ("the 2nd iteration (no optimizer: its parameters are updated by hand)"
                 if label in watch.by_hand else "the optimizer's 2nd step")
        print(f"\n== gradhunt watch: {label}; its step 0 is {start} ==\n{report}",
              file=sys.stderr)
    for label, text, _ in workers:
        print(f"\n== gradhunt watch: {label} ==\n{text}", file=sys.stderr)
    if watch.unwatched:
        print("\n== gradhunt watch: optimizers that stepped and were not watched ==",
              file=sys.stderr)
        for finding in watch.unwatched:
            print(finding, file=sys.stderr)
    for problem in watch.problems:
        print(f"gradhunt watch: {problem}", file=sys.stderr)
