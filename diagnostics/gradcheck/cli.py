"""``gradhunt compare``: minigrad's gradients next to torch's on built-in model pairs."""
import json
import sys

from ..backends import TORCH_MISSING, torch_installed
from .compare import compare_gradients
from .twins import available, build_pair


def add_compare_command(subparsers):
    parser = subparsers.add_parser(
        "compare", help="compare minigrad's gradients with torch's on built-in model pairs",
        description="Copy each built-in torch model's weights into its minigrad twin, run one "
                    "batch through both in float64 and compare the gradients parameter by "
                    "parameter. Exit code 0 when they all agree.")
    parser.add_argument("--model", choices=available() + ["all"], default="all",
                        help="which pair to compare (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights and batch")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(func=run_compare)
    return parser


def run_compare(args):
    if not torch_installed():
        print(f"gradhunt compare: {TORCH_MISSING}", file=sys.stderr)
        return 2
    names = available() if args.model == "all" else [args.model]
    reports = {name: compare_gradients(*build_pair(name, seed=args.seed)) for name in names}
    if args.json:
        print(json.dumps({name: r.to_dict() for name, r in reports.items()}, indent=2))
    else:
        print("\n\n".join(f"[{name}] {report}" for name, report in reports.items()))
    return 0 if all(r.passed for r in reports.values()) else 1
