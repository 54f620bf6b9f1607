"""The diagnostics' sub-commands of ``gradhunt`` (the command itself is ``scenarios.cli``).

Each ``add_*`` function registers one sub-command on an ``argparse`` sub-parser set; the
handler it sets (``func``) takes the parsed arguments and returns the exit code.
"""
from .gradcheck.cli import add_compare_command
from .integrations.watch_command import add_watch_command
from .tools.preflight.command import add_preflight_command


def add_commands(subparsers):
    """Register the diagnostics' sub-commands."""
    add_compare_command(subparsers)
    add_preflight_command(subparsers)
    add_watch_command(subparsers)
