"""check_gradients on large models: a 1.19M-parameter CNN, healthy and with a planted bug, and
a ResNet-18-style net at CIFAR size; times, evaluation counts, and a ratio to torch's gradcheck.

The CNN: three blocks of two 3x3 conv-BatchNorm-ReLU layers (64, 128, 256 channels), each block
ending in a 2x2 max-pool, and a linear head; 1,188,170 parameters; batch 8 of 3x32x32, cross-
entropy, BatchNorm in training mode. The planted bug is bug_injection's
``conv_kernel_not_flipped`` in conv '7' (the first conv of the middle block): a wrong input
gradient, which check_gradients must name with its path. The ResNet-18 is
``scenarios.resnet.ResNet18`` (BasicBlocks [2, 2, 2, 2], CIFAR stem; ``--width 64`` is the
original's 11M parameters). torch runs on 2 threads (``--threads``).

Counts are deterministic, times are not (a shared machine): each model prints its wall-clock
time and its process CPU time (steadier when other work shares the cores; with 2 threads it can
reach twice the wall time), its forward evaluations and the convolutions actually run, in full
forward passes' worth ("conv work"; a perturbed run recomputes only the modules after the
perturbation). The baseline, measured in
the same run, is torch.autograd.gradcheck's cost: two evaluations per parameter, at the time of
one float64 forward pass and loss measured here. The last line is the time ratio
check_gradients/torch gradcheck over all models.

    python benchmarks/gradcheck_scale.py [--threads 2] [--width 64] [--skip-resnet]
"""
import argparse
import contextlib
import time

import numpy as np
import torch

from bug_injection.planted import gradient
from bug_injection.reference.bench import Bench
from diagnostics import check_gradients
from scenarios.resnet import ResNet18

BUDGETS = {"cnn healthy": 10.0, "cnn planted": 10.0, "resnet-18": 60.0}   # seconds (issue 14)
PLANTED_MODULE = "7"


def cnn():
    torch.manual_seed(0)
    layers, channels = [], 3
    for width in (64, 128, 256):
        layers += [torch.nn.Conv2d(channels, width, 3, padding=1), torch.nn.BatchNorm2d(width),
                   torch.nn.ReLU(), torch.nn.Conv2d(width, width, 3, padding=1),
                   torch.nn.BatchNorm2d(width), torch.nn.ReLU(), torch.nn.MaxPool2d(2)]
        channels = width
    return torch.nn.Sequential(*layers, torch.nn.Flatten(), torch.nn.Linear(256 * 4 * 4, 10))


def resnet(width):
    torch.manual_seed(0)
    return ResNet18(width=width)


def cifar_batch():
    generator = torch.Generator().manual_seed(0)
    return (torch.randn(8, 3, 32, 32, generator=generator),
            torch.randint(0, 10, (8,), generator=generator))


def planted(model, module):
    """bug_injection's conv_kernel_not_flipped, planted in ``model``'s conv ``module``."""
    bench = Bench(setup="cnn", backend="torch", model=model, loss_fn=torch.nn.CrossEntropyLoss(),
                  optimizer=None, train_x=None, train_y=None, test_x=None, test_y=None,
                  loop=None)
    return gradient.conv_kernel_not_flipped(bench, module)


@contextlib.contextmanager
def counted_convolutions():
    """Counts every ``torch.nn.functional.conv2d`` call (nn.Conv2d and the planted Function's
    forward both go through it)."""
    original, count = torch.nn.functional.conv2d, [0]

    def conv2d(*args, **kwargs):
        count[0] += 1
        return original(*args, **kwargs)

    torch.nn.functional.conv2d = conv2d
    try:
        yield count
    finally:
        torch.nn.functional.conv2d = original


def forward_seconds(model, inputs, targets, repeats=3):
    """Median time of one float64 forward pass and loss, without a graph (a copy of ``model``)."""
    import copy

    twin = copy.deepcopy(model).double()
    inputs = inputs.double()
    times = []
    with torch.no_grad():
        for _ in range(repeats + 1):
            start = time.perf_counter()
            torch.nn.functional.cross_entropy(twin(inputs), targets)
            times.append(time.perf_counter() - start)
    return float(np.median(times[1:]))


def measure(name, model, *, plant=None):
    inputs, targets = cifar_batch()
    parameters = sum(p.numel() for p in model.parameters())
    convs = sum(isinstance(m, torch.nn.Conv2d) for m in model.modules())
    forward = forward_seconds(model, inputs, targets)
    with plant or contextlib.nullcontext(), counted_convolutions() as count:
        start, cpu = time.perf_counter(), time.process_time()
        report = check_gradients(model, torch.nn.CrossEntropyLoss(), inputs, targets)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    cause = report.causes[0] if report.causes else None
    named = (f"'{cause.module}' ({cause.module_type}), {cause.path} path, {cause.pattern}"
             if cause else "no culprit")
    expected_culprit = [PLANTED_MODULE] if plant is not None else []
    right = report.culprits == expected_culprit and (
        cause is None or cause.path == "input")
    gradcheck_seconds = 2 * parameters * forward
    budget = BUDGETS[name]
    print(f"{name}: {parameters:,} parameters, {convs} convs; float64 forward+loss "
          f"{forward * 1000:.0f} ms")
    print(f"  check_gradients: {seconds:.1f} s wall, {cpu:.1f} s CPU (budget {budget:.0f} s"
          f"{'' if seconds <= budget else ', OVER'}); {report.forward_evaluations} forward "
          f"evaluations + {report.backward_passes} backward; conv work {count[0] / convs:.1f} "
          f"full forwards ({count[0]} convolutions run)")
    print(f"  verdict: {'passed' if report.passed else 'FAILED'}; culprit {named}"
          f"{'' if right else '  <-- WRONG'}")
    print(f"  torch.autograd.gradcheck, estimated: {2 * parameters:,} evaluations, "
          f"{gradcheck_seconds:,.0f} s")
    return seconds, gradcheck_seconds, right


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--width", type=int, default=64, help="ResNet-18 width (default 64)")
    parser.add_argument("--skip-resnet", action="store_true", help="only the CNN")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}; batch 8 of 3x32x32, cross-entropy")
    results = [measure("cnn healthy", cnn())]
    model = cnn()
    results.append(measure("cnn planted", model, plant=planted(model, PLANTED_MODULE)))
    if not args.skip_resnet:
        results.append(measure("resnet-18", resnet(args.width)))
    ours = sum(r[0] for r in results)
    theirs = sum(r[1] for r in results)
    print(f"time ratio check_gradients/torch gradcheck (estimated), all models: "
          f"{ours / theirs:.2e}")
    return 0 if all(r[2] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
