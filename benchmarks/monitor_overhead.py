"""Monitor overhead: training-step time with Monitor(every=1) and with the default sampling,
against no monitor, on an MLP 784-512-512-10 with batch 128 on the CPU.

The three loops run interleaved in the same process, one block of ``DEFAULT_EVERY`` steps at a
time (so every block of a sampled Monitor holds exactly one sampled step, and blocks see the
same machine load); the figure is the median block time over the median block time without a
monitor. Budget (issue 4): <= 1.15 at every=1, <= 1.05 at the default. The last line is the
default's ratio.
"""
import argparse
import statistics
import time

import torch

from diagnostics.monitor import DEFAULT_EVERY, Monitor


def _mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 10))


def _loop(seed, every):
    model = _mlp(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    monitor = None if every is None else Monitor(model, optimizer, every=every)
    return model, optimizer, monitor


def _block(loop, batches):
    model, optimizer, monitor = loop
    start = time.perf_counter()
    for x, y in batches:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if monitor is not None:
            monitor.step(loss)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=60, help="blocks of steps per loop")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    batches = [(torch.randn(128, 784, generator=generator),
                torch.randint(0, 10, (128,), generator=generator))
               for _ in range(DEFAULT_EVERY)]
    loops = {"none": _loop(0, None), "every=1": _loop(0, 1),
             f"every={DEFAULT_EVERY} (default)": _loop(0, DEFAULT_EVERY)}
    times = {name: [] for name in loops}
    for name, loop in loops.items():   # warm-up, and the monitors' first two sampled steps
        _block(loop, batches)
    for index in range(args.blocks):
        names = list(loops)
        names = names[index % 3:] + names[:index % 3]   # rotate who goes first
        for name in names:
            times[name].append(_block(loops[name], batches))
    for _, _, monitor in loops.values():
        if monitor is not None:
            monitor.close()
    base = statistics.median(times["none"])
    print(f"step time without monitor: {base / DEFAULT_EVERY * 1e3:.3f} ms "
          f"(median of {args.blocks} blocks of {DEFAULT_EVERY} steps)")
    for name in list(loops)[1:]:
        ratio = statistics.median(times[name]) / base
        print(f"Monitor({name}): {statistics.median(times[name]) / DEFAULT_EVERY * 1e3:.3f} ms "
              f"per step, ratio {ratio:.3f}")
    print(f"{statistics.median(times[list(loops)[-1]]) / base:.3f}")


if __name__ == "__main__":
    main()
