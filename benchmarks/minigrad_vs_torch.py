"""One training step (forward, cross-entropy, backward, Adam) in minigrad vs torch on the CPU.

Two float32 models, each built twice with the same weights: an MLP 784-512-512-10 on a batch
of 128, and a small CNN (1x28x28, batch 64: conv-relu-pool-conv-relu-pool-linear). Steps of
the two frameworks are interleaved in the same run; the ratio is the median of the ratios of
neighbouring steps. The last line is the MLP ratio minigrad/torch (the line before, the CNN's).

Both frameworks get the same number of threads (``--threads``, default 1): NumPy's BLAS via
threadpoolctl, torch via ``torch.set_num_threads``. One thread each measures what differs,
the Python overhead and the copies around the same BLAS work; with more threads than free
cores, the two thread pools, interleaved, spin against each other and the figure is noise.

    python benchmarks/minigrad_vs_torch.py [--repeats 60] [--threads 1]
"""
import argparse
import statistics
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

import minigrad as mg
from minigrad import nn


def build_mlp(framework):
    return framework.Sequential(
        framework.Linear(784, 512), framework.ReLU(), framework.Linear(512, 512),
        framework.ReLU(), framework.Linear(512, 10))


def build_cnn(framework):
    return framework.Sequential(
        framework.Conv2d(1, 8, 3, padding=1), framework.ReLU(), framework.MaxPool2d(2),
        framework.Conv2d(8, 16, 3, padding=1), framework.ReLU(), framework.MaxPool2d(2),
        framework.Flatten(), framework.Linear(16 * 7 * 7, 10))


def make_pair(build):
    """A minigrad model and its torch twin holding the same float32 weights."""
    model, twin = build(nn), build(torch.nn)
    twin.load_state_dict({name: torch.from_numpy(value.data.copy())
                          for name, value in model.state_dict().items()})
    return model, twin


def train_step(model, optimizer, loss_fn, inputs, targets):
    """The same code trains either framework's model."""
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss


def compare(build, input_shape, *, repeats, warmup):
    """Seconds per step for minigrad and torch, one list each, measured interleaved."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal(input_shape).astype(np.float32)
    labels = rng.integers(0, 10, size=input_shape[0])
    model, twin = make_pair(build)
    runs = [
        (model, mg.optim.Adam(model.parameters(), lr=1e-3),
         nn.CrossEntropyLoss(), mg.tensor(data), mg.tensor(labels)),
        (twin, torch.optim.Adam(twin.parameters(), lr=1e-3),
         torch.nn.CrossEntropyLoss(), torch.from_numpy(data), torch.from_numpy(labels)),
    ]
    times = ([], [])
    for repeat in range(warmup + repeats):
        for args, spent in zip(runs, times):
            start = time.perf_counter()
            train_step(*args)
            if repeat >= warmup:
                spent.append(time.perf_counter() - start)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=60, help="timed steps per framework")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=1, help="threads for each framework")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, numpy {np.__version__}, {args.threads} thread(s) each, "
          f"median of {args.repeats} steps")
    ratios = {}
    with threadpool_limits(limits=args.threads, user_api="blas"):
        for name, build, shape in [("CNN 1x28x28 batch 64", build_cnn, (64, 1, 28, 28)),
                                   ("MLP 784-512-512-10 batch 128", build_mlp, (128, 784))]:
            ours, theirs = compare(build, shape, repeats=args.repeats, warmup=args.warmup)
            # the median of step-by-step ratios: neighbouring steps share the machine's load
            ratios[name] = statistics.median(a / b for a, b in zip(ours, theirs))
            print(f"{name}: minigrad {statistics.median(ours) * 1e3:.2f} ms/step, "
                  f"torch {statistics.median(theirs) * 1e3:.2f} ms/step")
    for name, ratio in ratios.items():
        print(f"ratio minigrad/torch, {name}: {ratio:.3f}")


if __name__ == "__main__":
    main()
