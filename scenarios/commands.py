"""``gradhunt scenarios`` (the list) and ``gradhunt scenario NAME`` (run one, exit 0 if its
checks held, 1 if not)."""
import json
import sys

from . import registry


def add_commands(subparsers):
    """Register ``scenarios`` and ``scenario`` on the ``gradhunt`` sub-parsers."""
    listing = subparsers.add_parser(
        "scenarios", help="list the runnable scenarios",
        description="List the scenarios: the lesson's broken-network demo and its exercises.")
    listing.set_defaults(func=run_list)
    one = subparsers.add_parser(
        "scenario", help="run one scenario; the exit code says whether its checks held",
        description="Run a scenario, print what it shows and its checks. Exit code 0 when "
                    "every check held, 1 when one did not.")
    one.add_argument("name", choices=registry.names(), metavar="NAME",
                     help="one of: " + ", ".join(registry.names()))
    one.add_argument("--fast", action="store_true",
                     help="small settings (seconds; what the test suite runs)")
    one.add_argument("--out", metavar="DIR", default=None,
                     help="folder for the files a scenario writes (default: a new temporary "
                          f"folder); taken by {', '.join(_taking('out_dir'))}")
    one.add_argument("--cifar10", metavar="DIR", default=None,
                     help=f"{', '.join(_taking('cifar10'))}: the folder of the CIFAR-10 "
                          "python batches (cifar-10-batches-py); without it, digits")
    one.add_argument("--json", action="store_true", help="print the result as JSON")
    one.set_defaults(func=run_one)


_FLAGS = {"out_dir": "--out", "cifar10": "--cifar10"}


def _taking(option):
    """The scenarios whose ``run()`` takes ``option``."""
    return [name for name, entry in registry.SCENARIOS.items() if option in entry.options]


def run_list(args):
    width = max(len(name) for name in registry.names())
    for name, entry in registry.SCENARIOS.items():
        print(f"{name:<{width}}  {entry.summary}")
    return 0


def run_one(args):
    entry = registry.SCENARIOS[args.name]
    given = {"out_dir": args.out, "cifar10": args.cifar10}
    unused = [key for key, value in given.items()
              if value is not None and key not in entry.options]
    if unused:
        for key in unused:
            print(f"gradhunt scenario {args.name}: {_FLAGS[key]} does not apply to this "
                  f"scenario; it applies to {', '.join(_taking(key))}")
        return 2
    options = {key: value for key, value in given.items() if key in entry.options}
    try:
        scenario = registry.load(args.name)
    except ModuleNotFoundError as error:  # torch, scikit-learn or matplotlib not installed
        print(f"gradhunt scenario {args.name}: needs {error.name}, which is not installed "
              f"(pip install 'gradhunt[scenarios]')", file=sys.stderr)
        return 2
    result = scenario.run(fast=args.fast, **options)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result)
    return 0 if result.passed else 1
