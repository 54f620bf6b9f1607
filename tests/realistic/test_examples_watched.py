"""The healthy zoo: the classic pytorch/examples programs (``tests/realistic/examples``), at
small CPU scale, run as ``gradhunt watch`` runs them (a ``TrainingWatch``, default settings,
no loop edits). Each program first shows it is healthy by its own metric; then no watched
model may get a warning or error, neither heard while it trains nor in its final report."""
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from diagnostics.backends import torch_threads  # noqa: E402
from diagnostics.integrations.watch import TrainingWatch  # noqa: E402

EXAMPLES = ("reinforce", "actor_critic", "dcgan", "time_sequence", "siamese", "vae",
            "autoencoder", "mnist_rnn", "autocast_cpu", "gcn", "word_language_model",
            "forward_forward")
ROOT = Path(__file__).resolve().parents[2]
# (program) -> what goes wrong today; strict xfail, so a fix must delete the entry
KNOWN_FALSE_ALARMS = {}


def _watched(name):
    program = importlib.import_module(f"tests.realistic.examples.{name}")
    heard = []
    with torch_threads(1), TrainingWatch(on_finding=lambda label, f: heard.append((label, f))) \
            as watch:
        metrics = program.main()
    return program, metrics, watch, heard


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_FALSE_ALARMS[n], strict=True))
    if n in KNOWN_FALSE_ALARMS else n for n in EXAMPLES])
def test_a_healthy_example_program_gets_no_warning_or_error(name):
    program, metrics, watch, heard = _watched(name)
    assert program.healthy(metrics), f"{name} is not healthy at this length: {metrics}"
    assert watch.watched and not watch.problems, watch.problems
    alarms = [(label, f) for label, f in heard if f.severity in ("warning", "error")]
    alarms += [(label, f) for label, report in watch.reports() for f in report.findings
               if f.severity in ("warning", "error") and (label, f) not in alarms]
    assert not alarms, "false alarms on a healthy program:\n" + "\n".join(
        f"{label}: {f.code} at {f.location}, step {f.first_step}: {f.message}"
        for label, f in alarms)


def test_the_watch_command_on_an_example_script_is_quiet():
    """The same, through ``gradhunt watch --fail-on warning`` on the file itself."""
    script = ROOT / "tests" / "realistic" / "examples" / "actor_critic.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "scenarios.cli", "watch", "--fail-on",
                          "warning", str(script)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "last_return" in run.stdout and "no findings" in run.stderr, run.stderr
