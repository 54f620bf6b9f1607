"""DistributedDataParallel on gloo (CPU), two workers started with
``torch.multiprocessing.spawn``, as pytorch/examples' DDP tutorial: each rank builds the model,
wraps it in DDP and trains on its own shard of a separable 3-class problem with SGD. The
metric: rank 0's loss on a held-out batch, before and after (written to a file the parent
reads, as a worker's return value is lost).

``zero_grad=False`` is the bug: ``.grad`` accumulates over the steps on every rank."""
import datetime
import json
import os
import socket
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn


def _batch(generator, weights, n=64):
    x = torch.randn(n, 8, generator=generator)
    return x, (x @ weights).argmax(1)


def worker(rank, world, port, zero_grad, steps, out):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    # a bounded rendezvous: a port taken between free_port() and here fails, not hangs
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    try:
        torch.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(
            nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3)))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        weights = torch.randn(8, 3, generator=torch.Generator().manual_seed(1))
        held_out = _batch(torch.Generator().manual_seed(99), weights, 512)
        data = torch.Generator().manual_seed(rank)

        def held_out_loss():
            with torch.no_grad():
                return nn.functional.cross_entropy(model(held_out[0]), held_out[1]).item()

        before = held_out_loss()
        for _ in range(steps):
            x, y = _batch(data, weights)
            if zero_grad:
                optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        if rank == 0:
            Path(out).write_text(json.dumps({"before": before, "after": held_out_loss()}))
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(steps=80, zero_grad=True, port=None):
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "metrics.json"
        mp.spawn(worker, args=(2, port or free_port(), zero_grad, steps, str(out)), nprocs=2,
                 join=True)
        return json.loads(out.read_text())


def healthy(metrics):
    return metrics["after"] < 0.5 * metrics["before"]


if __name__ == "__main__":
    print(main(zero_grad="--no-zero-grad" not in sys.argv))
