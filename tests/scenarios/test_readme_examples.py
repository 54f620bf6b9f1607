"""The README's Monitor and watch tours show what their scripts (docs/examples/) print: the same
root cause first and what follows from it. Numbers are left out of the comparison, and so are
the symptoms after those two: a diverging run's values differ between CPUs."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _headers(text):
    """The finding lines of a report (``  [error] CODE at place ..., follows from ...``),
    without their step ranges."""
    lines = [line.strip() for line in text.splitlines()
             if re.match(r"\s+\[(error|warning|info)\] [A-Z_]+", line)]
    return [re.sub(r" \(steps? [0-9-]+\)", "", line) for line in lines]


def _readme_block(after):
    """The report block (```` ``` ```` then ``gradhunt Monitor: ...``) after ``after``."""
    block = README.index("```\ngradhunt Monitor:", README.index(after)) + 4
    return README[block:README.index("```", block)]


def _run(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_monitor_tour_shows_what_its_script_prints():
    shown = _readme_block("### 3. The Monitor, on a loop that forgot `zero_grad()`")
    run = _run("docs/examples/monitor_no_zero_grad.py")
    assert run.returncode == 0, run.stderr
    assert _headers(shown)[:2] == _headers(run.stdout)[:2] == [
        "[error] STALE_GRADIENTS at 0.weight",
        "[error] LOSS_DIVERGING at loss, follows from STALE_GRADIENTS at 0.weight"]
    assert "1 more follows from them" in run.stdout


def test_the_watch_tour_shows_what_its_script_prints():
    start = README.index("$ gradhunt watch --fail-on error train.py")
    shown = README[start:README.index("```", start)]
    run = _run("-m", "scenarios.cli", "watch", "--fail-on", "error",
               "docs/examples/watch_no_zero_grad.py")
    assert run.returncode == 1
    shown_headers = _headers(shown)
    assert shown_headers[:2] == _headers(run.stderr)[:2] == [
        "[error] STALE_GRADIENTS at 0.weight",
        "[error] LOSS_DIVERGING at loss, follows from STALE_GRADIENTS at 0.weight"]
    for line in shown.splitlines()[1:4]:          # the alerts as they came, and the heading
        assert line == "..." or line in run.stderr


def test_the_uncatalogued_bug_tour_shows_what_its_blind_pair_prints():
    """Section 3b quotes the blind clipping pair's report: its root cause, in the same words."""
    shown = _readme_block("### 3b. A bug nobody catalogued")
    code = ("import warnings; warnings.filterwarnings('ignore'); "
            "from tests.blind.clipping import lstm_clip_before_backward as pair; "
            "print(pair.run(fixed=False, monitor=True)['report'])")
    run = _run("-c", code)
    assert run.returncode == 0, run.stderr
    # the root's severity is that of what follows from it, which depends on how far the run
    # diverges (on the CPU's rounding): the code, the place and the words do not
    unrated = [re.sub(r"^\[\w+\] ", "", h) for h in (_headers(shown)[0], _headers(run.stdout)[0])]
    assert unrated == ["CLIP_HAS_NO_EFFECT at optimizer"] * 2
    words = [line.strip() for line in shown.splitlines()[6:13]]   # the finding's words
    printed = " ".join(line.strip() for line in run.stdout.splitlines())
    assert " ".join(words) in printed


def test_the_step_equivalence_tour_shows_what_its_script_prints():
    """Section 3c quotes its script's report word for word (its numbers are counts of tokens
    and a ratio of float32 gradients, printed to 3 digits)."""
    start = README.index("```\nstep equivalence:", README.index("### 3c."))
    shown = README[start + 4:README.index("```", start + 4)]
    run = _run("docs/examples/step_equivalence_token_means.py")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == shown.strip()


def test_the_preflight_tour_shows_what_its_script_prints():
    """Section 4 quotes its script's checklist: every line shown (cut at " ...") is in it, up
    to its numbers (a loss after training steps differs in its last digits between CPUs)."""
    start = README.index(">>> print(preflight(model, loss_fn, x, y, train_step=my_train_step))")
    shown = README[start:README.index("\n\n", start)].splitlines()[1:]
    run = _run("docs/examples/preflight_tour.py")
    assert run.returncode == 0, run.stderr
    def masked(text):
        return re.sub(r"\d+(\.\d+)?", "#", text)
    printed = [masked(line) for line in run.stdout.splitlines()]
    for line in shown:
        if line.lstrip().startswith("..."):
            items = len([p for p in printed if p[:6] in ("  PASS", "  FAIL", "  SKIP")])
            assert masked(f"({items} items") in masked(line)
            continue
        head = masked(line.removesuffix(" ...")).rstrip("#")
        assert any(p.startswith(head) for p in printed), line


def test_the_guard_tour_shows_what_its_script_prints():
    """Section 3d quotes its script: every line shown is printed (numbers masked: the accuracy
    and the loss differ in their last digits between CPUs), the root cause first, and the
    guarded run trains where the unguarded one is lost."""
    start = README.index("```\ntest accuracy without the guard", README.index("### 3d."))
    shown = README[start + 4:README.index("```", start + 4)].splitlines()
    run = _run("docs/examples/guard_tour.py")
    assert run.returncode == 0, run.stderr

    def masked(text):
        return re.sub(r"\d+(\.\d+)?(e[+-]\d+)?", "#", text)
    printed = {masked(line) for line in run.stdout.splitlines()}
    assert all(masked(line) in printed for line in shown if line.strip() != "...")
    assert _headers(run.stdout)[0] == "[error] DATA_NONFINITE at data"
    unguarded, guarded = map(float, re.findall(r"(\d\.\d+)", run.stdout.splitlines()[0]))
    assert guarded > unguarded + 0.5
