"""``gradhunt watch``: real small training scripts run unchanged in a subprocess."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from scenarios import cli

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    bug = sys.argv[1] if len(sys.argv) > 1 else "none"
    x = torch.randn(256, 12)
    y = (x @ torch.randn(12, 3)).argmax(1)
    model = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(32, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(60):
        i = torch.randint(0, 256, (32,))
        if bug != "no_zero_grad":
            opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[i]), y[i])
        loss.backward()
        opt.step()
        if step == 30:
            if bug == "ctrl_c":   # a terminal's Ctrl-C, whatever the parent left inherited
                signal.signal(signal.SIGINT, signal.default_int_handler)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
                os.kill(os.getpid(), signal.SIGINT)
            if bug != "eval_in_train_mode":
                model.eval()
            with torch.no_grad():
                accuracy = (model(x).argmax(1) == y).float().mean().item()
            model.train()
    print(f"script done, accuracy {accuracy:.2f}")
""")


def _watch(tmp_path, *args, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "scenarios.cli", "watch", *args],
                          cwd=cwd or ROOT, env=env, capture_output=True, text=True, timeout=120)


def _script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return str(path)


def test_a_healthy_loop_gets_no_finding_and_its_output_and_jsonl(tmp_path):
    out = tmp_path / "rows.jsonl"
    run = _watch(tmp_path, "--every", "5", "--out", str(out), "--fail-on", "warning",
                 _script(tmp_path))
    assert run.returncode == 0, run.stderr
    assert "script done" in run.stdout                    # the script's stdout is its own
    assert "== gradhunt watch: model (Sequential, SGD); its step 0 is the optimizer's 2nd step ==" \
        in run.stderr
    assert "no findings: nothing looked wrong in 59 steps" in run.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) >= 10 and all("loss" in row for row in rows)


def test_an_evaluation_pass_in_train_mode_is_found(tmp_path):
    run = _watch(tmp_path, "--every", "5", _script(tmp_path), "eval_in_train_mode")
    assert "[warning] TRAIN_MODE_AT_EVAL at 2" in run.stderr, run.stderr
    assert run.returncode == 0          # without --fail-on a finding does not fail the run


def test_ctrl_c_prints_the_report_so_far(tmp_path):
    run = _watch(tmp_path, "--every", "5", _script(tmp_path), "ctrl_c")
    assert run.returncode == 130
    assert "interrupted" in run.stderr and "gradhunt Monitor: torch Sequential, 30 steps" \
        in run.stderr, run.stderr
    assert "script done" not in run.stdout


def test_a_module_with_a_missing_zero_grad_is_found_and_fails_the_run(tmp_path):
    package = tmp_path / "trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(SCRIPT)
    run = _watch(tmp_path, "--every", "5", "--fail-on", "error", "-m", "trainer", "no_zero_grad",
                 cwd=tmp_path)
    assert "[error] STALE_GRADIENTS at 0.weight" in run.stderr, run.stderr
    assert "script done" in run.stdout          # ran as `python -m trainer no_zero_grad`
    assert run.returncode == 1


def test_a_script_that_fails_keeps_its_exit_code(tmp_path, capsys):
    path = tmp_path / "fails.py"
    path.write_text("import sys\nsys.exit(3)\n")
    assert cli.main(["watch", str(path)]) == 3
    assert "no model was watched" in capsys.readouterr().err


def test_a_missing_script_is_a_usage_error(tmp_path, capsys):
    assert cli.main(["watch", str(tmp_path / "absent.py")]) == 2
    assert "no such script" in capsys.readouterr().err
