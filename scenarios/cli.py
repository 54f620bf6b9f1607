"""``gradhunt``: hunt planted bugs, compare minigrad with torch, check a model before training."""
import argparse
import sys

from bug_injection import cli as bug_injection_cli
from diagnostics import cli as diagnostics_cli

from . import commands as scenario_commands

DEFAULT_COMMAND = "hunt"


def build_parser():
    parser = argparse.ArgumentParser(
        prog="gradhunt",
        description="Find the bugs in neural-network code that never raise an error.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    bug_injection_cli.add_commands(subparsers)
    diagnostics_cli.add_commands(subparsers)
    scenario_commands.add_commands(subparsers)
    return parser


def main(argv=None):
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv.insert(0, DEFAULT_COMMAND)
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
