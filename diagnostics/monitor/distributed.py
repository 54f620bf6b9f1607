"""The Monitor inside a torch.distributed job: one small exchange per sampled step, merged
findings and cross-rank checks.

Every rank builds its Monitor (the constructor creates gradhunt's own gloo group, a collective).
At each sampled step (the same steps on every rank: sampling depends on the step alone) every
rank sends one fixed-size byte row to one ``all_gather`` on that group: its step, parameter,
gradient, input and buffer fingerprints (and the buffers' at its last evaluation pass, with
that pass's step), then its new findings (pickled, as many as fit; the rest go at the next
sampled step). Nothing is exchanged at the other steps. The group has a timeout, so a rank
that raised or stopped calling ``step()`` cannot block the others for ever: on a failed
exchange the survivors ask a second, untouched group which ranks are missing
(``monitored_barrier``), record ``RANK_STOPPED`` and exchange no more. ``report()`` makes no
collective (the ranks need not call it together): a finding a rank first sees in its own
``report()``, after its last sampled step, stays in that rank's report.
"""
import pickle
import re
import sys
from dataclasses import replace
from datetime import timedelta

import numpy as np

from ..findings import SEVERITIES
from .checks.ranks import RankSample, RanksView, run_rank_checks

FINDINGS_BYTES = 16384   # room for new findings in one rank's row (about 30 findings)
PROBE_SECONDS = 10.0     # how long the survivors wait to learn who is missing (at most)
SINKS_ON = ("rank0", "all")


def unwrap(model):
    """The module inside a DistributedDataParallel or DataParallel wrapper, else ``model``:
    parameter names then match across ranks and with a single-process run."""
    torch = sys.modules.get("torch")
    if torch is None:
        return model
    wrappers = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    return model.module if isinstance(model, wrappers) else model


def broadcasts_buffers(model):
    """True for a DistributedDataParallel wrapper that broadcasts rank 0's buffers before its
    forwards (``broadcast_buffers=True``, the default): its ranks cannot hold different
    buffers where a forward reads them, so the Monitor does not compare them."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    ddp = torch.nn.parallel.DistributedDataParallel
    return isinstance(model, ddp) and bool(getattr(model, "broadcast_buffers", False))


def process_group():
    """``(rank, world_size)`` when a torch.distributed process group of 2 or more ranks is
    initialised, else None (torch is not imported for the question)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.distributed.is_available():
        return None
    dist = torch.distributed
    if not dist.is_initialized() or dist.get_world_size() < 2:
        return None
    return dist.get_rank(), dist.get_world_size()


def fingerprint(tensor):
    """Three float64 sums of a tensor, on its device: all, every third element, absolute."""
    import torch

    flat = tensor.detach().reshape(-1)
    if not flat.is_floating_point():     # token ids, masks
        flat = flat.double()
    return torch.stack([flat.sum(dtype=torch.float64), flat[1::3].sum(dtype=torch.float64),
                        torch.linalg.vector_norm(flat, 1, dtype=torch.float64)])


class RankExchange:
    """One rank's side of the exchange: sends its row, keeps every rank's fingerprints and
    findings, runs the cross-rank checks and merges findings by (code, location)."""

    def __init__(self, rank, world, names, *, timeout, window, buffers=()):
        import torch.distributed as dist

        self._dist = dist
        self.rank, self.world, self.names = rank, world, list(names)
        self.buffers = list(buffers)     # buffer names, in fingerprint order
        self.timeout = float(timeout)
        self._group = dist.new_group(backend="gloo", timeout=timedelta(seconds=self.timeout))
        self._probe_seconds = min(PROBE_SECONDS, self.timeout)
        self._probe_group = dist.new_group(backend="gloo",
                                           timeout=timedelta(seconds=self._probe_seconds))
        # step, length, then fingerprints: parameters, gradients, input, buffers; then the
        # step of the last evaluation pass and the buffers at its first forward
        self._numbers = 2 + 9 * len(self.names) + 3 + 6 * len(self.buffers) + 1
        self._view = RanksView(world, self.names, buffer_names=self.buffers)
        self._window = window
        self._sent = {}                  # (code, location) -> severity sent
        self._remote = {}                # (code, location) -> {rank: Finding}
        self._cross = {}                 # (code, location) -> cross-rank Finding
        self.stopped = False
        self.exchanges = 0               # completed exchanges (one per sampled step)

    # ----------------------------------------------------------------- exchange
    def exchange(self, step, fingerprints, findings):
        """Send this rank's row, receive everyone's; never raises (a failed exchange becomes
        ``RANK_STOPPED`` and ends the exchanges). Returns the cross-rank findings that are new
        or more severe than before."""
        if self.stopped:
            return []
        import torch

        row = self._row(step, fingerprints, findings)
        rows = [torch.empty_like(row) for _ in range(self.world)]
        try:
            self._dist.all_gather(rows, row, group=self._group)
        except Exception as error:          # noqa: BLE001 - a peer failed; never the user's loop
            return self._stop(step, error)
        self.exchanges += 1
        return self._receive(step, [r.numpy() for r in rows])

    def _row(self, step, fingerprints, findings):
        import torch

        numbers = np.full(self._numbers, np.nan)
        numbers[0] = step
        offset = 2
        for key in ("params", "local", "final"):
            values = fingerprints.get(key)
            if values is not None:
                numbers[offset:offset + values.size] = values.reshape(-1)
            offset += 3 * len(self.names)
        if fingerprints.get("inputs") is not None:
            numbers[offset:offset + 3] = fingerprints["inputs"]
        offset += 3
        count = 3 * len(self.buffers)
        if fingerprints.get("buffers") is not None and self.buffers:
            numbers[offset:offset + count] = fingerprints["buffers"].reshape(-1)
        offset += count
        if fingerprints.get("eval_buffers") is not None and self.buffers:
            numbers[offset] = np.asarray(fingerprints["eval_step"]).reshape(-1)[0]
            numbers[offset + 1:offset + 1 + count] = fingerprints["eval_buffers"].reshape(-1)
        blob = self._pack(findings)
        numbers[1] = len(blob)
        row = np.zeros(8 * self._numbers + FINDINGS_BYTES, dtype=np.uint8)
        row[:8 * self._numbers] = numbers.view(np.uint8)
        row[8 * self._numbers:8 * self._numbers + len(blob)] = np.frombuffer(blob, np.uint8)
        return torch.from_numpy(row)

    def _pack(self, findings):
        """The findings new (or more severe) since the last exchange, as many as fit."""
        severity = {s: i for i, s in enumerate(SEVERITIES)}
        new = [f for f in findings if (f.code, f.location) not in self._sent
               or severity[f.severity] > severity[self._sent[(f.code, f.location)]]]
        while True:
            blob = pickle.dumps(new)
            if len(blob) <= FINDINGS_BYTES:
                break
            new = new[:len(new) // 2]
        for f in new:
            self._sent[(f.code, f.location)] = f.severity
        return blob

    def _receive(self, step, rows):
        count, names = self._numbers, len(self.names)
        numbers = np.stack([r[:8 * count].view(np.float64) for r in rows])
        for rank, r in enumerate(rows):
            length = int(numbers[rank, 1])
            if rank != self.rank and length:
                for finding in pickle.loads(r[8 * count:8 * count + length].tobytes()):
                    self._remote.setdefault((finding.code, finding.location), {})[rank] = finding
        blocks = [numbers[:, 2 + 3 * names * i:2 + 3 * names * (i + 1)].reshape(
            self.world, names, 3) for i in range(3)]
        start, count = 5 + 9 * names, len(self.buffers)
        buffers = numbers[:, start:start + 3 * count].reshape(self.world, count, 3)
        start += 3 * count
        evaluated = numbers[:, start + 1:start + 1 + 3 * count].reshape(self.world, count, 3)
        sample = RankSample(step, *blocks, numbers[:, 2 + 9 * names:5 + 9 * names], buffers,
                            numbers[:, start], evaluated)
        self._view.samples = (self._view.samples + [sample])[-self._window:]
        return self._check()

    def _stop(self, step, error):
        self.stopped = True
        missing = [r for r in range(self.world) if r != self.rank]
        try:
            self._dist.monitored_barrier(group=self._probe_group,
                                         timeout=timedelta(seconds=self._probe_seconds),
                                         wait_all_ranks=True)
        except Exception as probe_error:    # noqa: BLE001
            named = _named_ranks(str(probe_error))
            if named and self.rank == 0:
                missing = named
        self._view.stopped = {"ranks": missing, "step": step,
                              "error": _first_line(error), "reporting_rank": self.rank}
        return self._check()

    def _check(self):
        """Run the cross-rank checks; a finding stays once found, but an ``info`` one is
        provisional (``BUFFERS_DIVERGED`` before an evaluation pass is compared): it goes when
        the checks no longer return it."""
        severity = {s: i for i, s in enumerate(SEVERITIES)}
        found = run_rank_checks(self._view)
        current = {(f.code, f.location) for f in found}
        self._cross = {key: f for key, f in self._cross.items()
                       if f.is_alarm or key in current}
        new = []
        for finding in found:
            key = (finding.code, finding.location)
            known = self._cross.get(key)
            if known is None or severity[finding.severity] > severity[known.severity]:
                new.append(finding)
            self._cross[key] = finding
        return new

    # ------------------------------------------------------------------ merging
    def merged(self, local):
        """This rank's findings and the other ranks', one per (code, location), each naming the
        ranks it holds on (``evidence["ranks"]``; the message says so when not all), with each
        rank's evidence where they differ; then the cross-rank findings."""
        severity = {s: i for i, s in enumerate(SEVERITIES)}
        by_key = {}
        for finding in local:
            by_key.setdefault((finding.code, finding.location), {})[self.rank] = finding
        for key, per_rank in self._remote.items():
            by_key.setdefault(key, {}).update(per_rank)
        merged = [_merge(per_rank, self.world) for per_rank in by_key.values()]
        merged += list(self._cross.values())
        return sorted(merged, key=lambda f: -severity[f.severity])


def _merge(per_rank, world):
    ranks = sorted(per_rank)
    severity = {s: i for i, s in enumerate(SEVERITIES)}
    base = per_rank[ranks[0]]
    worst = max(per_rank.values(), key=lambda f: severity[f.severity])
    evidence = dict(base.evidence)
    evidence["ranks"] = ranks
    if any(per_rank[r].evidence != base.evidence for r in ranks[1:]):
        evidence["per_rank"] = {r: per_rank[r].evidence for r in ranks}
    message = base.message
    if len(ranks) < world:
        message = (f"{message} (on rank {ranks[0]} only, of {world})" if len(ranks) == 1
                   else f"{message} (on ranks {', '.join(map(str, ranks))} of {world})")
    return replace(base, severity=worst.severity, message=message, evidence=evidence)


def _named_ranks(text):
    """The ranks a failed ``monitored_barrier`` names ("Ranks 1, 3 failed to pass ...")."""
    match = re.search(r"Ranks? ([\d, ]+) failed to pass", text)
    return [int(r) for r in re.findall(r"\d+", match.group(1))] if match else []


def _first_line(error):
    text = str(error).strip().splitlines()
    if not text:
        return type(error).__name__
    line = text[0] if len(text[0]) <= 160 else text[0][:157] + "..."
    return f"{type(error).__name__}: {line}"
