"""The Monitor under torch.distributed: 2 CPU ranks (gloo) train one small classifier with
DistributedDataParallel, healthy, then with two planted cross-rank bugs.

* healthy: DDP and a DistributedSampler: no finding on any rank;
* a manual all-reduce that sums the gradients and forgets to divide by the world size:
  ``GRADIENTS_NOT_SYNCED`` (summed);
* no DistributedSampler: every rank reads the same batches: ``SAME_BATCH_ON_RANKS``.

Each rank runs its own ``Monitor(model, optimizer)``; rank 0's report holds the merged findings.
``launch(jobs)`` runs any list of jobs in one spawned 2-process group (the tests use it too).
"""
import datetime
import json
import math
import os
import socket
import tempfile
import time
from pathlib import Path

from .result import ScenarioResult

NAME = "distributed"
TITLE = "the Monitor in a 2-rank gloo DDP job: healthy, summed all-reduce, no DistributedSampler"
WORLD = 2
FEATURES, CLASSES = 16, 4


def free_port():
    """A free TCP port on the loopback interface, found at run time."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def job(name, **options):
    """A training job for ``launch``: ``sync`` ("ddp", "average", "sum" or "none"),
    ``watch`` ("wrapper": give the Monitor the DDP wrapper, or "module"), ``shard`` (a
    DistributedSampler), ``steps``, ``every``, ``nan_rank``/``nan_step`` (a NaN in that rank's
    input), ``raise_rank``/``raise_step`` (that rank raises and leaves the job), ``reset_rank``/
    ``reset_step`` (that rank resets a parameter on its own), ``rank_timeout``, ``norm`` (a
    BatchNorm1d after the first layer), ``broadcast_buffers`` (DDP's option),
    ``sync_buffers`` (True: all-reduce the buffers after each step; "eval": only before each
    evaluation pass, as timm's ``--dist-bn reduce``) and ``eval_every`` (an evaluation pass
    under ``no_grad`` in eval mode, on every rank, before every n-th step; ``eval_mode=False``
    keeps training mode, as a no_grad pass that makes pseudo-labels; ``eval_through="module"``
    calls the module inside DDP, as transformers' Trainer evaluates)."""
    spec = {"name": name, "sync": "ddp", "watch": "wrapper", "shard": True, "steps": 12,
            "every": 2, "nan_rank": None, "nan_step": 3, "raise_rank": None, "raise_step": 3,
            "reset_rank": None, "reset_step": 3, "sinks_on": None,
            "stall_rank": None, "stall_step": 3, "stall_seconds": 0.0,
            "rank_timeout": 30.0, "norm": False, "broadcast_buffers": True,
            "sync_buffers": False, "eval_every": None, "eval_mode": True,
            "eval_through": "wrapper"}
    unknown = set(options) - set(spec)
    if unknown:
        raise ValueError(f"job: unknown options {sorted(unknown)}")
    spec.update(options)
    return spec


def launch(jobs, *, world=WORLD):
    """Run ``jobs`` in order in one group of ``world`` spawned CPU processes (gloo over
    127.0.0.1). Returns ``{job name: [per-rank result dict]}``: ``findings`` (rank 0's are the
    merged ones), ``report`` (its text), ``parameters`` (names in the report), ``seconds``,
    ``raised`` (the exception a planted failure raised), ``announced`` ([code, severity] of
    each ``on_finding`` call, in order)."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="gradhunt-ddp-") as out:
        mp.spawn(_worker, args=(world, free_port(), jobs, out), nprocs=world, join=True)
        return {spec["name"]: [json.loads(Path(out, f"{spec['name']}-{rank}.json").read_text())
                               for rank in range(world)] for spec in jobs}


def _worker(rank, world, port, jobs, out):
    import torch
    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    left = False
    try:
        for spec in jobs:
            result = _train(rank, world, spec, out)
            Path(out, f"{spec['name']}-{rank}.json").write_text(json.dumps(result))
            if result["raised"]:
                left = True      # this rank leaves the job, as a crashed rank would
                return
    finally:
        if not left:
            dist.destroy_process_group()


def _data(seed=1, n=256):
    import torch

    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(n, FEATURES, generator=generator)
    teacher = torch.randn(FEATURES, CLASSES, generator=generator)
    return features, (features @ teacher).argmax(dim=1)


def _model(norm=False):
    import torch

    torch.manual_seed(0)   # the same initial weights on every rank, with or without DDP
    layers = [torch.nn.Linear(FEATURES, 32), torch.nn.BatchNorm1d(32)] if norm else [
        torch.nn.Linear(FEATURES, 32)]
    return torch.nn.Sequential(*layers, torch.nn.ReLU(), torch.nn.Linear(32, CLASSES))


def _train(rank, world, spec, out):
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from bug_injection.planted.distributed import (all_reduce_buffers, all_reduce_gradients,
                                          rank_batches, rank_local_reset, summed_all_reduce)
    from diagnostics import Monitor
    from diagnostics.monitor import CSVSink

    model = _model(spec["norm"])
    net = (DistributedDataParallel(model, **_buffer_option(spec["broadcast_buffers"]))
           if spec["sync"] == "ddp" else model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    features, targets = _data()
    loader = rank_batches(features, targets, 16, rank=rank, world=world, shard=spec["shard"])
    watched = net if spec["watch"] == "wrapper" else model
    started, raised, announced = time.perf_counter(), None, []
    options = {"on_finding": lambda f: announced.append([f.code, f.severity])}
    if spec["sinks_on"] is not None:
        options.update(sinks_on=spec["sinks_on"],
                       sinks=[CSVSink(Path(out, f"{spec['name']}-{rank}.csv"))])
    with Monitor(watched, optimizer, every=spec["every"], rank_timeout=spec["rank_timeout"],
                 **options) as monitor:
        try:
            _loop(rank, spec, net, model, optimizer, loader, monitor,
                  (all_reduce_gradients, summed_all_reduce, rank_local_reset,
                   all_reduce_buffers))
        except RuntimeError as error:
            if spec["raise_rank"] != rank:
                raise
            raised = str(error)
        report = monitor.report()
        exchanges = monitor._ranks.exchanges if monitor._ranks is not None else None
    csv = Path(out, f"{spec['name']}-{rank}.csv")
    return {"findings": [f.to_dict() for f in report.findings], "report": str(report),
            "exchanges": exchanges,
            "csv_rows": len(csv.read_text().splitlines()) - 1 if csv.exists() else None,
            "parameters": [p.name for p in report.parameters] if raised is None else [],
            "seconds": time.perf_counter() - started, "raised": raised,
            "announced": announced}


def _buffer_option(broadcast):
    """DDP's keyword for its buffer broadcast: ``forward_sync_buffers`` where torch has it
    (``broadcast_buffers`` is deprecated there), else ``broadcast_buffers``."""
    import inspect

    from torch.nn.parallel import DistributedDataParallel

    known = inspect.signature(DistributedDataParallel).parameters
    return {"forward_sync_buffers" if "forward_sync_buffers" in known
            else "broadcast_buffers": broadcast}


def _loop(rank, spec, net, model, optimizer, loader, monitor, bugs):
    import torch

    average, summed, reset, sync_buffers = bugs
    loss_fn = torch.nn.CrossEntropyLoss()
    step, epoch = 0, 0
    while step < spec["steps"]:
        sampler = getattr(loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        for x, y in loader:
            if step >= spec["steps"]:
                break
            if spec["raise_rank"] == rank and step == spec["raise_step"]:
                raise RuntimeError(f"planted failure on rank {rank} at step {step}")
            if spec["stall_rank"] == rank and step == spec["stall_step"]:
                time.sleep(spec["stall_seconds"])
            if spec["nan_rank"] == rank and step == spec["nan_step"]:
                x = x.clone()
                x[0, 0] = math.nan
            if spec["reset_rank"] == rank and step == spec["reset_step"]:
                reset(model)
            if spec["eval_every"] and step % spec["eval_every"] == 0:
                if spec["sync_buffers"] == "eval":
                    sync_buffers(model)
                evaluated = model if spec["eval_through"] == "module" else net
                net.train(not spec["eval_mode"])
                with torch.no_grad():
                    evaluated(x)
                net.train()
            optimizer.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            if spec["sync"] == "average":
                average(model)
            elif spec["sync"] == "sum":
                summed(model)
            optimizer.step()
            if spec["sync_buffers"] is True:
                sync_buffers(model)
            monitor.step(loss)
            step += 1
        epoch += 1


RUNS = (  # (job, claim, codes that must be found on rank 0, codes that must not)
    ("healthy", "healthy DDP with a DistributedSampler: no finding", (), None),
    ("summed_all_reduce", "a manual all-reduce that sums: GRADIENTS_NOT_SYNCED",
     ("GRADIENTS_NOT_SYNCED",), ("RANKS_DIVERGED",)),
    ("no_sampler", "no DistributedSampler: SAME_BATCH_ON_RANKS", ("SAME_BATCH_ON_RANKS",),
     ("GRADIENTS_NOT_SYNCED", "RANKS_DIVERGED")),
)


def run(*, fast=False):
    """Three jobs in one spawned 2-rank group; ``fast`` trains 8 steps instead of 60."""
    result = ScenarioResult(NAME, TITLE, fast)
    steps, every = (8, 2) if fast else (60, 10)
    jobs = [job("healthy", steps=steps, every=every),
            job("summed_all_reduce", sync="sum", steps=steps, every=every),
            job("no_sampler", shard=False, steps=steps, every=every)]
    with result.timed():
        outcome = launch(jobs)
    for name, claim, wanted, unwanted in RUNS:
        rank0 = outcome[name][0]
        codes = [f["code"] for f in rank0["findings"]]
        result.section(f"{name} (rank 0's report, merged over {WORLD} ranks)")
        result.say(rank0["report"])
        if wanted:
            held = all(code in codes for code in wanted) and not any(
                code in codes for code in unwanted)
        else:
            held = not codes
        result.check(claim, held, f"rank 0 found {codes or 'nothing'}")
    return result
