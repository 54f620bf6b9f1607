"""Cross-rank checks of a torch.distributed job: each reads a ``RanksView`` (what every rank
measured at the sampled steps exchanged so far) and returns findings.

Fingerprints are three float64 sums per tensor: the sum, the sum of every third element and the
sum of absolute values. Healthy data-parallel ranks hold bit-identical parameters and reduced
gradients, so any difference beyond rounding is a bug; the first two sums are linear, so a
reduced gradient can be compared with the mean (DDP, a correct all-reduce) and with the sum (an
all-reduce that forgot to divide by the world size) of the ranks' local gradients.
"""
import warnings
from dataclasses import dataclass, field

import numpy as np

from ...findings import Finding

SAME_TOLERANCE = 1e-6     # relative: fingerprints closer than this are the same tensor
MATCH_TOLERANCE = 1e-3    # relative: a reduced gradient "is" the sum of the locals
MIN_TOTAL = 1e-3          # of the absolute sums: below, the local sums cancel too much to judge
MIN_SAME_BATCHES = 2      # sampled steps with identical inputs on every rank before saying so


@dataclass
class RankSample:
    """What every rank measured at one sampled step: arrays of shape (ranks, parameters, 3)
    for ``params``, ``local`` (gradients before any reduction) and ``final`` (the gradients
    the optimizer used), (ranks, 3) for ``inputs``, (ranks, buffers, 3) for ``buffers`` (as
    the step's first training forward starts) and ``eval_buffers`` (at the first forward of
    the rank's last evaluation pass, which ran during step ``eval_step``, shape (ranks,));
    NaN where a rank had none."""

    step: int
    params: np.ndarray
    local: np.ndarray
    final: np.ndarray
    inputs: np.ndarray
    buffers: np.ndarray | None = None
    eval_step: np.ndarray | None = None
    eval_buffers: np.ndarray | None = None


@dataclass
class RanksView:
    world: int
    names: list                                      # parameter names, in fingerprint order
    samples: list = field(default_factory=list)      # RankSample, oldest first
    stopped: dict | None = None                      # {"ranks": [...], "step": s, "error": str}
    buffer_names: list = field(default_factory=list)  # persistent buffers, in fingerprint order


def _differ(fingerprints):
    """Per parameter: True where the ranks' fingerprints (ranks, P, 3) are not the same."""
    with warnings.catch_warnings():      # parameters without a gradient anywhere: all NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return _differ_nan_quiet(fingerprints)


def _differ_nan_quiet(fingerprints):
    scale = np.nanmax(np.abs(fingerprints[..., 2]), axis=0)            # (P,)
    finite = np.isfinite(fingerprints).all(axis=2)                       # (ranks, P)
    spread = np.nanmax(fingerprints, axis=0) - np.nanmin(fingerprints, axis=0)   # (P, 3)
    return ((np.nanmax(spread, axis=1) > SAME_TOLERANCE * np.maximum(scale, 1e-30))
            | (finite.any(axis=0) & ~finite.all(axis=0)))   # NaN on some ranks only


def _ranks_text(ranks):
    return ", ".join(str(r) for r in ranks)


def ranks_diverged(view):
    """Parameters that are not the same on every rank after an optimizer step."""
    if not view.samples:
        return []
    sample = view.samples[-1]
    params = sample.params
    if np.isnan(params).all():
        return []
    differ = _differ(params)
    if not differ.any():
        return []
    names = [n for n, d in zip(view.names, differ) if d]
    first = names[0]
    index = view.names.index(first)
    sums = {rank: float(params[rank, index, 0]) for rank in range(view.world)}
    return [Finding(
        "RANKS_DIVERGED", "error", first,
        f"after the optimizer's step at step {sample.step}, {len(names)} of {len(view.names)} "
        f"parameters differ across the {view.world} ranks (first: {first}, whose element sum "
        f"is {', '.join(f'{v:.6g} on rank {r}' for r, v in sums.items())}): the ranks now "
        f"train different models",
        "wrap the model in DistributedDataParallel (or all-reduce every gradient before the "
        "step); look for code that changes parameters on some ranks only (if rank == 0: ...), "
        "and give every rank the same initial weights and seed",
        {"step": sample.step, "parameters": names, "sum_per_rank": sums})]


def gradients_not_synced(view):
    """Gradients the optimizer used that were not averaged across ranks: different on each
    rank (not reduced at all), or the sum of the local gradients instead of their mean."""
    if not view.samples:
        return []
    sample = view.samples[-1]
    final, local = sample.final, sample.local
    if np.isnan(final).all():
        return []
    differ = _differ(final)
    if differ.any():
        names = [n for n, d in zip(view.names, differ) if d]
        return [Finding(
            "GRADIENTS_NOT_SYNCED", "error", names[0],
            f"at step {sample.step} the gradients of {len(names)} of {len(view.names)} "
            f"parameters differ across the {view.world} ranks when the optimizer steps (first: "
            f"{names[0]}): they were not all-reduced, so each rank follows its own batches",
            "wrap the model in DistributedDataParallel, or all-reduce every parameter's "
            "gradient (dist.all_reduce(p.grad); p.grad /= world_size) before optimizer.step(); "
            "a parameter created after the DDP wrapper is not synchronised",
            {"step": sample.step, "parameters": names, "how": "not reduced"})]
    known = np.isfinite(local).all(axis=(0, 2)) & np.isfinite(final[0]).all(axis=1)
    if not known.any():
        return []
    linear_final = final[0, known, :2]              # the same on every rank (checked above)
    total = local[:, known, :2].sum(axis=0)
    mean = total / view.world
    absolute = np.abs(local[:, known, 2]).sum()
    if absolute == 0:
        return []
    # summed and averaged gradients differ by (1 - 1/world) |total|; rounding is bounded by
    # the absolute sums, so a total that cancels out below 1e-3 of them is not judged
    scale = max(np.abs(total).sum(), MIN_TOTAL * absolute)
    off_mean = np.abs(linear_final - mean).sum() / scale
    off_sum = np.abs(linear_final - total).sum() / scale
    if not (off_sum <= MATCH_TOLERANCE and off_mean >= 0.25):
        return []
    return [Finding(
        "GRADIENTS_NOT_SYNCED", "error", None,
        f"at step {sample.step} every rank's gradient is the sum of the {view.world} ranks' "
        f"local gradients, not their mean: the effective learning rate is {view.world}x the "
        f"one set (relative distance to the sum {off_sum:.2g}, to the mean {off_mean:.2g})",
        f"divide by the world size after the all-reduce (p.grad /= {view.world}, or "
        f"dist.all_reduce(p.grad, op=dist.ReduceOp.AVG) on NCCL), or use "
        f"DistributedDataParallel, which averages",
        {"step": sample.step, "how": "summed", "world_size": view.world,
         "distance_to_sum": off_sum, "distance_to_mean": off_mean})]


def same_batch_on_ranks(view):
    """Every rank read the very same input batch at every sampled step (no DistributedSampler)."""
    rows = [s for s in view.samples if not np.isnan(s.inputs).any()]
    if view.world < 2 or len(rows) < MIN_SAME_BATCHES:
        return []
    for sample in rows:
        inputs = sample.inputs
        if inputs[0, 2] == 0 or (np.abs(inputs - inputs[0]).max(axis=1)
                                 > SAME_TOLERANCE * inputs[0, 2]).any():
            return []
    steps = [s.step for s in rows]
    return [Finding(
        "SAME_BATCH_ON_RANKS", "warning", "data",
        f"all {view.world} ranks read identical input batches at each of the {len(steps)} "
        f"sampled steps {steps[0]}..{steps[-1]}: the job does the work of one process "
        f"{view.world} times",
        "give the DataLoader a DistributedSampler(dataset) (and call sampler.set_epoch(epoch) "
        "each epoch), or shard the data by rank",
        {"steps": steps, "world_size": view.world})]


def rank_stopped(view):
    """A rank stopped taking part: gradhunt's exchange timed out or failed waiting for it."""
    stopped = view.stopped
    if not stopped:
        return []
    ranks = stopped["ranks"]
    which = (f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {_ranks_text(ranks)}")
    return [Finding(
        "RANK_STOPPED", "error", None,
        f"{which} did not reach the Monitor's exchange at step {stopped['step']} "
        f"({stopped['error']}): it raised, exited or stopped calling monitor.step(); the other "
        f"ranks go on without cross-rank checks",
        f"read {which}'s own log for its exception; in a DDP job the surviving ranks block in "
        f"the next all-reduce, so fix the failing rank first",
        dict(stopped))]


def _buffers_apart(view, prints):
    """``(names, relative difference per name, ranks)`` of the buffers whose fingerprints
    (ranks, buffers, 3) differ across ranks; None when they match or a rank has none."""
    if prints is None or np.isnan(prints).all(axis=(1, 2)).any():
        return None
    differ = _differ(prints)
    if not differ.any():
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        scale = np.maximum(np.nanmax(np.abs(prints[..., 2]), axis=0), 1e-30)       # (B,)
        off = np.abs(prints - prints[0]).max(axis=2) / scale                        # (ranks, B)
    off = np.where(np.isnan(off), np.inf, off)
    names = [n for n, d in zip(view.buffer_names, differ) if d]
    relative = {n: float(off[:, i].max()) for i, (n, d) in
                enumerate(zip(view.buffer_names, differ)) if d}
    ranks = [r for r in range(view.world) if r == 0 or (off[r][differ] > SAME_TOLERANCE).any()]
    return names, relative, ranks


def _evaluation_step(sample):
    """The step during which every rank's last evaluation pass ran (the same one on each), or
    None: no pass yet, or not on every rank (evaluation on rank 0 only), or not the same."""
    steps = sample.eval_step
    if steps is None or sample.eval_buffers is None or not np.isfinite(steps).all() \
            or (steps != steps[0]).any():
        return None
    return int(steps[0])


def buffers_diverged(view):
    """Buffers (batch-norm running statistics, EMA tables) that differ across ranks where it
    matters: the ranks evaluate with them, or may. Two fingerprints (``probes.ranks``): at
    the step's first training forward, and at the first forward of the last evaluation pass
    (the root module not training). Both are taken inside DDP's forward, after its
    ``broadcast_buffers`` copy, so they are bit-identical when anything keeps the buffers in
    step (DDP's broadcast, SyncBatchNorm, an all-reduce of the buffers each step, identical
    batches on every rank); in eval mode the buffers are read, not updated, so the second one
    is what the whole pass evaluated with.

    * different at the evaluation pass: a warning (the ranks evaluated with different
      statistics); only info when the training fingerprints of the window were all the same
      (something copies the buffers before each training forward, DDP's broadcast: the pass
      bypassed it, by running the module inside DDP as transformers' Trainer evaluates, and
      saw only the updates of the last training forward, undone at the next one);
    * the same at the evaluation pass, which ran after the first step: quiet, whatever the
      training fingerprint says (a job that averages the buffers only before it evaluates:
      timm's ``--no-ddp-bb --dist-bn reduce``);
    * no such pass compared yet (none, on some ranks only, or only before the first step)
      and different at the training forward: info, a drift that matters at evaluation or
      checkpoint time unless the buffers are averaged first; ``RankExchange`` drops it once
      a matching evaluation pass comes.

    A rank without a fingerprint is not compared."""
    if not view.samples or not view.buffer_names:
        return []
    sample = view.samples[-1]
    total = len(view.buffer_names)
    evaluated = _evaluation_step(sample)
    if evaluated is not None:
        apart = _buffers_apart(view, sample.eval_buffers)
        if apart is not None and _kept_in_step(view):
            return [_evaluated_since_broadcast(view, evaluated, *apart)]
        if apart is not None:
            names, relative, ranks = apart
            return [Finding(
                "BUFFERS_DIVERGED", "warning", names[0],
                f"at the evaluation pass during step {evaluated}, {len(names)} of {total} "
                f"buffers differed across {_which(ranks, view.world)}: "
                f"{_shown(names, relative)}. The ranks evaluated with different statistics "
                f"(each updated them with its own batches and nothing averaged or copied "
                f"them before the pass), so their scores are not those of one model, and a "
                f"checkpoint saved from rank 0 holds buffers the other ranks never used",
                "average the buffers before each evaluation and each checkpoint (dist."
                "all_reduce(buf); buf /= world_size for every running_mean and running_var; "
                "timm: --dist-bn reduce), or keep DistributedDataParallel(model, "
                "broadcast_buffers=True) (the default, named forward_sync_buffers in newer "
                "torch: rank 0's buffers are copied to every rank before each forward), or "
                "convert batch norm with torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)",
                {"when": "evaluation", "step": evaluated, "buffers": names,
                 "differing_ranks": ranks, "relative_difference": relative})]
        if evaluated > 0:
            return []
    apart = _buffers_apart(view, sample.buffers)
    if apart is None:
        return []
    names, relative, ranks = apart
    return [Finding(
        "BUFFERS_DIVERGED", "info", names[0],
        f"at step {sample.step}, {len(names)} of {total} buffers differ across "
        f"{_which(ranks, view.world)} as the training forward starts: "
        f"{_shown(names, relative)}. Each rank updates them with its own batches; no "
        f"evaluation pass after the first step has been compared on every rank yet. Harmless "
        f"while training, but unless they are averaged first, the ranks will evaluate with "
        f"different statistics and a checkpoint saved from rank 0 will hold buffers the other "
        f"ranks never used",
        "nothing, if the job averages or broadcasts the buffers before it evaluates and saves "
        "(timm: --dist-bn reduce; gradhunt then compares them at the evaluation pass); "
        "otherwise keep DistributedDataParallel(model, broadcast_buffers=True) (the default, "
        "named forward_sync_buffers in newer torch), convert batch norm with torch.nn."
        "SyncBatchNorm.convert_sync_batchnorm(model), or all-reduce the buffers (dist."
        "all_reduce(buf); buf /= world_size) before each evaluation and checkpoint",
        {"when": "training", "step": sample.step, "buffers": names, "differing_ranks": ranks,
         "relative_difference": relative})]


def _kept_in_step(view):
    """True when the buffers were fingerprinted at a training forward on every rank at least
    once in the window and were the same each time: something (DDP's broadcast, an
    all-reduce) makes them equal before each training forward."""
    taken = [s.buffers for s in view.samples if s.buffers is not None
             and not np.isnan(s.buffers).all(axis=(1, 2)).any()]
    return bool(taken) and not any(_differ(prints).any() for prints in taken)


def _evaluated_since_broadcast(view, evaluated, names, relative, ranks):
    return Finding(
        "BUFFERS_DIVERGED", "info", names[0],
        f"at the evaluation pass during step {evaluated}, {len(names)} of "
        f"{len(view.buffer_names)} buffers differed across {_which(ranks, view.world)}: "
        f"{_shown(names, relative)}, though they were the same at every training forward "
        f"compared: the pass ran without DDP's copy of rank 0's buffers (on the module inside "
        f"DistributedDataParallel, or after a no_grad pass in training mode), so each rank "
        f"evaluated with its own last training batch mixed into the statistics; the next "
        f"training forward makes them equal again",
        "nothing, unless the ranks' scores must agree exactly: then evaluate through the "
        "DistributedDataParallel wrapper (its forward after a training forward copies rank "
        "0's buffers), or all-reduce the buffers (dist.all_reduce(buf); buf /= world_size) "
        "before evaluating",
        {"when": "evaluation", "step": evaluated, "buffers": names, "differing_ranks": ranks,
         "relative_difference": relative, "kept_in_step_while_training": True})


def _shown(names, relative):
    shown = ", ".join(f"{n} (relative difference {relative[n]:.2g})" for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _which(ranks, world):
    return f"ranks {_ranks_text(ranks)}" if len(ranks) < world else f"the {world} ranks"


CHECKS = (rank_stopped, ranks_diverged, gradients_not_synced, same_batch_on_ranks,
          buffers_diverged)


def run_rank_checks(view):
    return [finding for check in CHECKS for finding in check(view)]
