"""check_step_equivalence on the 1.19M-parameter CNN of gradcheck_scale.py: its time against one
plain training step of the same train_step, measured in the same run.

The train_step accumulates gradients over 4 micro-batches of a batch of 32 3x32x32 images
(cross-entropy over each micro-batch divided by 4, SGD with momentum), the documented way; the
model's BatchNorm layers are in train mode, so its micro-batches are legitimately not the whole
batch and the check takes its longest healthy path (the parts' weights read in eval mode).
A second train_step sums the micro-batches' means (a factor of 4) and is named. The default
precision is float32; float64 is timed as well, for the record. torch runs on
``--threads`` threads. Times are medians of ``--repeats`` runs (wall clock; a shared machine).
The last line is the ratio of the check's time to one plain step's.

    python benchmarks/step_equivalence_cost.py [--threads 2] [--repeats 3]
"""
import argparse
import statistics
import time

import torch

from diagnostics import check_step_equivalence
from gradcheck_scale import cnn

BATCH, PARTS = 32, 4
BUDGET = 3.0       # issue 28: at most 3x one plain step of the user's train_step


def make_step(scale):
    def train_step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        for x, y in zip(inputs.chunk(PARTS), targets.chunk(PARTS)):
            (torch.nn.functional.cross_entropy(model(x), y) * scale).backward()
        optimizer.step()
    return train_step


def timed(function, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = cnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(BATCH, 3, 32, 32, generator=generator)
    targets = torch.randint(0, 10, (BATCH,), generator=generator)
    healthy, summed = make_step(1 / PARTS), make_step(1.0)
    healthy(model, (inputs, targets), optimizer)           # warm-up
    step_time, _ = timed(lambda: healthy(model, (inputs, targets), optimizer), args.repeats)

    def check(step, precision="float32"):
        return lambda: check_step_equivalence(model, torch.nn.functional.cross_entropy, inputs,
                                              targets, train_step=step, optimizer=optimizer,
                                              precision=precision)
    healthy_time, healthy_result = timed(check(healthy), args.repeats)
    buggy_time, buggy_result = timed(check(summed), args.repeats)
    exact_time, exact_result = timed(check(healthy, "float64"), args.repeats)
    print(f"CNN {sum(p.numel() for p in model.parameters()):,} parameters, batch {BATCH} in "
          f"{PARTS} micro-batches, {args.threads} torch thread(s), median of {args.repeats}")
    print(f"one plain train_step: {step_time:.3f} s")
    print(f"check, healthy step: {healthy_time:.3f} s, ratio {healthy_time / step_time:.2f} "
          f"(passed: {healthy_result.passed})")
    print(f"check, summed micro-batch means: {buggy_time:.3f} s, ratio "
          f"{buggy_time / step_time:.2f} (named: {not buggy_result.passed}; "
          f"{buggy_result[0].evidence.get('pattern')})")
    print(f"check, healthy step, precision='float64': {exact_time:.3f} s, ratio "
          f"{exact_time / step_time:.2f} (passed: {exact_result.passed}; float64 convolutions "
          f"have no fast CPU kernel)")
    print(f"budget (the default precision): <= {BUDGET:.1f}x")
    print(f"{healthy_time / step_time:.2f}")


if __name__ == "__main__":
    main()
