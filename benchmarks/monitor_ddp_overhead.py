"""Monitor overhead under 2-rank DistributedDataParallel (gloo on the CPU): training-step time
with the default ``Monitor(model, optimizer)`` on every rank against the same DDP loop without
one, on an MLP 784-512-512-10 with batch 64 per rank.

Two DDP loops run interleaved in the same two processes, one block of ``DEFAULT_EVERY`` steps
at a time (every block of the monitored loop holds exactly one sampled step, with its one
cross-rank exchange), so both loops see the same machine load; the ratio is rank 0's median
block time over the unmonitored loop's median, by the wall clock, with the process CPU-time
ratio beside it (steadier when other work shares the cores). Budget (issue 15): <= 1.05.
The last line is the wall-clock ratio.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

from diagnostics.monitor import DEFAULT_EVERY, Monitor
from scenarios.distributed import free_port

WORLD = 2


def _loop(monitored):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    net = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return net, optimizer, Monitor(net, optimizer) if monitored else None


def _block(loop, batches):
    net, optimizer, monitor = loop
    wall, cpu = time.perf_counter(), time.process_time()
    for x, y in batches:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        optimizer.step()
        if monitor is not None:
            monitor.step(loss)
    return time.perf_counter() - wall, time.process_time() - cpu


def _worker(rank, port, blocks, threads, out):
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    generator = torch.Generator().manual_seed(rank)
    batches = [(torch.randn(64, 784, generator=generator),
                torch.randint(0, 10, (64,), generator=generator))
               for _ in range(DEFAULT_EVERY)]
    loops = {"no monitor": _loop(False), "Monitor (default)": _loop(True)}
    for loop in loops.values():   # warm-up, and the monitor's first two sampled steps
        _block(loop, batches)
    times = {name: [] for name in loops}
    for index in range(blocks):
        names = list(loops) if index % 2 == 0 else list(reversed(loops))
        for name in names:
            times[name].append(_block(loops[name], batches))
    loops["Monitor (default)"][2].close()
    if rank == 0:
        out.put({name: (statistics.median(t[0] for t in runs),
                        statistics.median(t[1] for t in runs)) for name, runs in times.items()})
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=20, help="blocks of steps per loop")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    args = parser.parse_args()
    context = mp.get_context("spawn")
    out = context.SimpleQueue()
    mp.spawn(_worker, args=(free_port(), args.blocks, args.threads, out), nprocs=WORLD)
    medians = out.get()
    (base_wall, base_cpu), (wall, cpu) = medians["no monitor"], medians["Monitor (default)"]
    print(f"2-rank DDP (gloo, CPU), MLP 784-512-512-10, batch 64 per rank, {args.threads} "
          f"torch thread(s) per rank; rank 0's median of {args.blocks} interleaved blocks of "
          f"{DEFAULT_EVERY} steps")
    print(f"no monitor: {base_wall / DEFAULT_EVERY * 1e3:.3f} ms per step "
          f"(process CPU {base_cpu / DEFAULT_EVERY * 1e3:.3f} ms)")
    print(f"Monitor(every={DEFAULT_EVERY}): {wall / DEFAULT_EVERY * 1e3:.3f} ms per step "
          f"(process CPU {cpu / DEFAULT_EVERY * 1e3:.3f} ms), CPU-time ratio {cpu / base_cpu:.3f}")
    print(f"{wall / base_wall:.3f}")


if __name__ == "__main__":
    main()
