"""Workers started with ``torch.multiprocessing.spawn`` (or ``start_processes``) while a
``TrainingWatch`` is open: a DDP job's ranks.

A spawned worker is a fresh interpreter: the watch's hooks are not in it. So the watch wraps
``start_processes`` while it is open and hands each worker, in place of its function, a
``WatchedWorker``: a picklable stand-in holding the function (by reference, as spawn pickles
it anyway) and the watch's settings, that runs the function inside a ``TrainingWatch`` of the
worker's own and writes what it watched to a folder the parent reads at exit
(``WorkerWatch``, pickled). Inside a torch.distributed job each rank's Monitor already holds
the findings merged over the ranks (``monitor/distributed.py``), so the parent shows the
lowest rank's reports as the job's; workers without a process group are shown one by one.

Workers started by fork inherit a copy of the parent's hooks and are not wrapped (nothing of
theirs would come back): the watch says how many were not watched.
"""
import pickle
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WatchedModel:
    """One Monitor of a worker: its label, its report as text, and its findings."""

    label: str
    text: str
    findings: tuple
    steps: int


@dataclass(frozen=True)
class WorkerWatch:
    """What a worker's watch saw: its rank, the process group's size (None outside one), its
    Monitors and its problems."""

    rank: int
    world: int | None
    models: tuple
    problems: tuple


class WatchedWorker:
    """The worker function under a watch of its own, as ``spawn`` calls it: ``(rank, *args)``."""

    def __init__(self, fn, *, every, folder):
        self.fn, self.every, self.folder = fn, every, str(folder)

    def __call__(self, rank, *args):
        from .watch import TrainingWatch

        watch = TrainingWatch(every=self.every, on_finding=lambda label, f: _alert(rank, label, f))
        try:
            with watch:
                return self.fn(rank, *args)
        finally:
            _write(Path(self.folder), rank, watch)


class SpawnedWorkers:
    """The parent's side: ``start_processes`` wrapped while the watch is open, one folder per
    call, read at exit into ``jobs`` (``[[WorkerWatch, ...] per call]``) and ``problems``."""

    def __init__(self, every):
        self.every = every
        self.jobs, self.problems = [], []
        self._calls = []            # (folder, nprocs) per wrapped call
        self._forked = 0
        self._root = None

    def patch(self, patch):
        """Wrap ``start_processes`` where ``spawn`` and user code find it (``patch(owner,
        name, wrap)`` is the watch's own, undone at its exit)."""
        import torch.multiprocessing

        module = sys.modules["torch.multiprocessing.spawn"]
        patch(module, "start_processes", self._wrap)
        patch(torch.multiprocessing, "start_processes", self._wrap)

    def _wrap(self, original):
        def start_processes(fn, args=(), nprocs=1, join=True, daemon=False,
                            start_method="spawn"):
            if start_method == "fork":
                self._forked += nprocs
                return original(fn, args, nprocs, join, daemon, start_method)
            if self._root is None:
                self._root = tempfile.mkdtemp(prefix="gradhunt-watch-")
            folder = Path(self._root) / str(len(self._calls))
            folder.mkdir()
            self._calls.append((folder, nprocs))
            worker = WatchedWorker(fn, every=self.every, folder=folder)
            return original(worker, args, nprocs, join, daemon, start_method)
        return start_processes

    def collect(self):
        """Read what the workers wrote (once), then remove the folder."""
        import shutil

        calls, self._calls = self._calls, []
        for folder, nprocs in calls:
            found = []
            for path in sorted(folder.glob("rank*.pkl")):
                try:
                    found.append(pickle.loads(path.read_bytes()))
                except Exception as error:   # a worker killed while writing
                    self.problems.append(f"{path.name}: unreadable: {type(error).__name__}")
            missing = nprocs - len(found)
            if missing > 0:
                self.problems.append(f"{missing} of {nprocs} spawned worker processes left no "
                                     f"report (killed, or the watch failed there)")
            self.jobs.append(sorted(found, key=lambda w: w.rank))
            for worker in self.jobs[-1]:
                self.problems.extend(f"worker {worker.rank}: {p}" for p in worker.problems)
        if self._forked:
            self.problems.append(f"{self._forked} worker processes were started with fork and "
                                 f"are not watched (spawn's are)")
            self._forked = 0
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def shown(self):
        """``[(label, text, findings)]`` to print: per job, the lowest rank's Monitors when the
        workers formed a process group (their findings are merged over the ranks), else every
        worker's."""
        shown = []
        for job in self.jobs:
            if not job:
                continue
            grouped = [w for w in job if w.world]
            workers = grouped[:1] if grouped else job
            for worker in workers:
                for model in worker.models:
                    where = (f"ranks 0-{worker.world - 1}, findings merged over them"
                             if worker.world else f"worker {worker.rank}")
                    shown.append((f"{model.label} [spawned: {where}]", model.text,
                                  model.findings))
        return shown


def _world(watch):
    """The size of the process group the worker's Monitors exchanged findings in, None when
    they were in none (read after the job ended: the group may be destroyed by then)."""
    sizes = [getattr(getattr(monitor, "_ranks", None), "world", None)
             for _, monitor in watch.watched]
    return next((size for size in sizes if size), None)


def _alert(rank, label, finding):
    from ..monitor.distributed import process_group

    if finding.is_alarm and (rank == 0 or process_group() is None):
        print(f"gradhunt watch: worker {rank}: {label}: [{finding.severity}] {finding.code}",
              file=sys.stderr)


def _write(folder, rank, watch):
    world = _world(watch)
    models = []
    problems = list(watch.problems)
    try:
        for label, report in watch.reports():
            models.append(WatchedModel(label, str(report), tuple(report.findings),
                                       report.steps))
    except Exception as error:   # the worker's own result stands; its report is lost
        problems.append(f"its reports failed: {type(error).__name__}: {error}")
    data = pickle.dumps(WorkerWatch(rank, world, tuple(models), tuple(problems)))
    path = folder / f"rank{rank:05d}.pkl"
    partial = path.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(path)
