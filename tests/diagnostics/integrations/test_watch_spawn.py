"""Workers started with ``torch.multiprocessing.spawn`` under a watch (issue 32): each DDP rank
runs under a watch of its own, and the job comes back as one report, its findings merged over
the ranks (gloo, CPU)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from diagnostics.integrations import TrainingWatch  # noqa: E402
from tests.realistic.examples import ddp_spawn  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tests" / "realistic" / "examples" / "ddp_spawn.py"
LABEL = "model (DistributedDataParallel, SGD) [spawned: ranks 0-1, findings merged over them]"


def _watch_command(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "scenarios.cli", "watch", "--fail-on",
                           "warning", str(SCRIPT), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)


def test_a_healthy_ddp_job_is_watched_in_its_workers_and_quiet():
    run = _watch_command()
    assert run.returncode == 0, run.stderr
    assert f"== gradhunt watch: {LABEL} ==" in run.stderr, run.stderr
    assert run.stderr.count("== gradhunt watch:") == 1          # one report for the job
    assert "no findings" in run.stderr and "no model was watched" not in run.stderr


def test_a_ddp_job_that_never_zeroes_its_gradients_is_named_once():
    run = _watch_command("--no-zero-grad")
    assert run.returncode == 1, run.stderr
    assert "gradhunt watch: worker 0: model (DistributedDataParallel, SGD): [error] " \
           "STALE_GRADIENTS" in run.stderr, run.stderr
    assert run.stderr.count("[error] STALE_GRADIENTS at") == 1, run.stderr


def test_worker_reports_come_back_to_the_watch_in_process():
    with TrainingWatch() as watch:
        metrics = ddp_spawn.main(steps=40)
    assert ddp_spawn.healthy(metrics), metrics
    assert watch.watched == [] and watch.problems == []
    [(label, text, findings)] = watch.worker_reports()
    assert label == LABEL and findings == () and "39 steps" in text
    assert len(watch.spawned.jobs) == 1 and [w.rank for w in watch.spawned.jobs[0]] == [0, 1]


def _idle(rank):
    return None


def test_workers_started_by_fork_are_said_not_to_be_watched():
    with TrainingWatch() as watch:
        torch.multiprocessing.start_processes(_idle, nprocs=1, start_method="fork")
    assert watch.problems == ["1 worker processes were started with fork and are not watched "
                              "(spawn's are)"]
