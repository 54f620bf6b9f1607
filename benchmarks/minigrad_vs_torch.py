"""One training step (forward, cross-entropy, backward, Adam) in minigrad vs torch on the CPU.

Three float32 models, each built twice with the same weights: an MLP 784-512-512-10 on a batch
of 128, a small CNN (1x28x28, batch 64: conv-relu-pool-conv-relu-pool-linear), and the
character-level GPT of ``bug_injection/reference/gpt.py`` (4 blocks, width 128, 4 heads,
context 64, batch 16, tied head, next-token loss on the Zen of Python, AdamW). Steps of the two
frameworks are interleaved in the same run; the ratio is the median of the ratios of
neighbouring steps.
The last line is the MLP ratio minigrad/torch (the line before, the CNN's; before that the
GPT's).

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
from bug_injection.reference import gpt, text
from minigrad import nn

GPT_CONFIG = gpt.GPTConfig(vocab_size=len(text.vocabulary()), block_size=64, width=128, heads=4,
                           layers=4)


def build_mlp(framework):
    return framework.Sequential(
        framework.Linear(784, 512), framework.ReLU(), framework.Linear(512, 512),
        framework.ReLU(), framework.Linear(512, 10))


def build_cnn(framework):
    return framework.Sequential(
        framework.Conv2d(1, 8, 3, padding=1), framework.ReLU(), framework.MaxPool2d(2),
        framework.Conv2d(8, 16, 3, padding=1), framework.ReLU(), framework.MaxPool2d(2),
        framework.Flatten(), framework.Linear(16 * 7 * 7, 10))


def build_gpt(framework):
    return gpt.gpt_classes(framework).GPT(GPT_CONFIG)


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


def classifier_batch(input_shape):
    rng = np.random.default_rng(0)
    return (rng.standard_normal(input_shape).astype(np.float32),
            rng.integers(0, 10, size=input_shape[0]))


def text_batch(batch):
    x, y = text.sequences(length=GPT_CONFIG.block_size)
    rows = np.random.default_rng(0).choice(len(x), size=batch, replace=len(x) < batch)
    return x[rows], y[rows]


TASKS = [  # name, model builder, (inputs, targets), loss and optimizer per framework
    ("GPT 4x128 context 64 batch 16", build_gpt, lambda: text_batch(16),
     lambda framework: gpt.gpt_classes(framework).NextTokenLoss(), "AdamW"),
    ("CNN 1x28x28 batch 64", build_cnn, lambda: classifier_batch((64, 1, 28, 28)),
     lambda framework: framework.CrossEntropyLoss(), "Adam"),
    ("MLP 784-512-512-10 batch 128", build_mlp, lambda: classifier_batch((128, 784)),
     lambda framework: framework.CrossEntropyLoss(), "Adam"),
]


def compare(build, batch, loss, optimizer, *, repeats, warmup):
    """Seconds per step for minigrad and torch, one list each, measured interleaved."""
    data, labels = batch()
    model, twin = make_pair(build)
    runs = [
        (model, getattr(mg.optim, optimizer)(model.parameters(), lr=1e-3),
         loss(nn), mg.tensor(data), mg.tensor(labels)),
        (twin, getattr(torch.optim, optimizer)(twin.parameters(), lr=1e-3),
         loss(torch.nn), torch.from_numpy(data), torch.from_numpy(labels)),
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
        for name, build, batch, loss, optimizer in TASKS:
            ours, theirs = compare(build, batch, loss, optimizer, repeats=args.repeats,
                                   warmup=args.warmup)
            # the median of step-by-step ratios: neighbouring steps share the machine's load
            ratios[name] = statistics.median(a / b for a, b in zip(ours, theirs))
            print(f"{name}: minigrad {statistics.median(ours) * 1e3:.2f} ms/step, "
                  f"torch {statistics.median(theirs) * 1e3:.2f} ms/step")
    for name, ratio in ratios.items():
        print(f"ratio minigrad/torch, {name}: {ratio:.3f}")


if __name__ == "__main__":
    main()
