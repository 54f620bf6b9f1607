"""check_gradients vs torch.autograd.gradcheck on an MLP 64-128-128-10 with one planted bug.

The model (26,122 parameters, float64, batch 8) has a square Linear at index 2 whose
backward sends ``grad @ W.T`` to its input where ``grad @ W`` belongs. torch's gradcheck runs
in slow mode on the loss as a function of the flat parameter vector (``torch.func.
functional_call``): 2 evaluations per parameter. To keep this script short it is timed on a
spread-out subset of the parameters and the time per evaluation is extrapolated to all of
them (``--full`` runs it on every parameter instead). Both run single-threaded in this
process, after a warm-up. The last line is the time ratio check_gradients/torch.

    python benchmarks/gradcheck_cost.py [--subset N] [--full] [--repeats N] [--show-report]
"""
import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.autograd.gradcheck import GradcheckError  # noqa: E402
from torch.func import functional_call  # noqa: E402

from bug_injection.planted import formulas  # noqa: E402
from bug_injection.planted.functions import spoiled_function  # noqa: E402
from diagnostics import check_gradients  # noqa: E402

EVALUATION_BUDGET = 0.01   # of torch's evaluations
TIME_BUDGET = 0.05         # of torch's time
INPUT_USES_W_T = spoiled_function("torch", "linear", 0, formulas.input_with_weight_transposed)


class BuggyLinear(torch.nn.Linear):
    """``nn.Linear`` calling the catalogue's Linear whose input gradient uses ``W.T``."""

    def forward(self, x):
        return INPUT_USES_W_T.apply(x, self.weight, self.bias)


def _problem():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), BuggyLinear(128, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10)).double()
    rng = np.random.default_rng(0)
    inputs = torch.from_numpy(rng.standard_normal((8, 64)))
    targets = torch.from_numpy(rng.integers(0, 10, 8))
    return model, inputs, targets


def _torch_gradcheck(model, inputs, targets, indices):
    """torch's slow gradcheck of the loss over the parameters at flat ``indices``.

    Returns (evaluations, seconds, its message's first line or "passed").
    """
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for _, p in model.named_parameters()]
    flat = torch.cat([p.detach().reshape(-1) for _, p in model.named_parameters()])
    calls = [0]

    def loss_of(subset):
        calls[0] += 1
        full = flat.index_put((indices,), subset)
        params, start = {}, 0
        for name, shape in zip(names, shapes):
            size = shape.numel()
            params[name] = full[start:start + size].reshape(shape)
            start += size
        output = functional_call(model, params, (inputs,))
        return torch.nn.functional.cross_entropy(output, targets)

    subset = flat[indices].clone().requires_grad_()
    start = time.perf_counter()
    try:
        torch.autograd.gradcheck(loss_of, (subset,), eps=1e-6, atol=1e-5, rtol=1e-3,
                                 fast_mode=False)
        message = "passed"
    except GradcheckError as error:
        message = str(error).strip().splitlines()[0].rstrip(",")
    return calls[0], time.perf_counter() - start, message


def _ours(model, inputs, targets, repeats):
    """(report, median seconds) of check_gradients over ``repeats`` runs."""
    times, report = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        report = check_gradients(model, torch.nn.CrossEntropyLoss(), inputs, targets)
        times.append(time.perf_counter() - start)
    return report, float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset", type=int, default=2000,
                        help="parameters torch's gradcheck is timed on (default 2000)")
    parser.add_argument("--full", action="store_true", help="time torch on every parameter")
    parser.add_argument("--repeats", type=int, default=3, help="runs of check_gradients")
    parser.add_argument("--show-report", action="store_true", help="print the report")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, inputs, targets = _problem()
    total = sum(p.numel() for p in model.parameters())
    check_gradients(model, torch.nn.CrossEntropyLoss(), inputs, targets)  # warm-up

    count = total if args.full else min(args.subset, total)
    indices = torch.from_numpy(np.linspace(0, total - 1, count).round().astype(np.int64))
    evaluations, seconds, message = _torch_gradcheck(model, inputs, targets, indices)
    per_evaluation = seconds / evaluations
    torch_evaluations = evaluations + 2 * (total - count)
    torch_seconds = per_evaluation * torch_evaluations

    report, our_seconds = _ours(model, inputs, targets, args.repeats)
    cause = report.causes[0] if report.causes else None
    named = (f"'{cause.module}' ({cause.module_type}), {cause.path} path, {cause.pattern}"
             if cause else "no culprit")
    right = report.culprits == ["2"] and cause.path == "input"
    eval_ratio = report.forward_evaluations / torch_evaluations
    time_ratio = our_seconds / torch_seconds

    print(f"model: MLP 64-128-128-10, {total} parameters, float64, batch 8; planted bug: "
          f"'2' (square Linear) sends grad @ W.T to its input; torch threads: "
          f"{torch.get_num_threads()}")
    scope = "all" if count == total else f"{count} of {total}"
    print(f"torch.autograd.gradcheck, slow mode over the flat parameter vector: timed on "
          f"{scope} parameters, {evaluations} evaluations in {seconds:.2f} s "
          f"({1e6 * per_evaluation:.0f} us each)")
    if count < total:
        print(f"  all {total} parameters, extrapolated at that rate: {torch_evaluations} "
              f"evaluations, {torch_seconds:.1f} s")
    print(f"  names: {message}")
    print(f"check_gradients (mode 'auto'): {report.forward_evaluations} forward evaluations + "
          f"{report.backward_passes} backward, {our_seconds:.3f} s (median of {args.repeats})")
    print(f"  names: {named}; faulty parameters {', '.join(report.faulty)}"
          f"{'' if right else '  <-- WRONG CULPRIT'}")
    if args.show_report:
        print()
        print(report)
        print()
    print(f"evaluations ratio check_gradients/torch: {eval_ratio:.4f} "
          f"(budget {EVALUATION_BUDGET}){'' if eval_ratio <= EVALUATION_BUDGET else '  OVER'}")
    print(f"time ratio check_gradients/torch: {time_ratio:.4f} (budget {TIME_BUDGET})"
          f"{'' if time_ratio <= TIME_BUDGET else '  OVER'}")
    return 0 if right else 1


if __name__ == "__main__":
    raise SystemExit(main())
