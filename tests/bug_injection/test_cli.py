"""``gradhunt hunt`` and ``gradhunt inject``: output, JSON, exit codes; plain ``gradhunt``."""
import json

import pytest

import bug_injection.tools as tools
import bug_injection.hunt as hunt_module
from scenarios import cli


def test_hunt_json_parses_and_exit_code_is_zero_when_all_found(capsys):
    code = cli.main(["hunt", "--bug", "nonfinite_rows", "--bug", "linear_sign_flip", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["passed"]
    assert {(o["name"], o["backend"]) for o in data["outcomes"] if o["kind"] != "control"} == {
        ("nonfinite_rows", "minigrad"), ("nonfinite_rows", "torch"),
        ("linear_sign_flip", "minigrad"), ("linear_sign_flip", "torch")}
    assert data["controls"] == 4 and data["controls_clean"] == 4


def test_hunt_table_and_backend_option(capsys):
    code = cli.main(["hunt", "--bug", "train_test_duplicates", "--backend", "torch"])
    out = capsys.readouterr().out
    header, rule, row, *rest = out.splitlines()
    assert header.split() == ["bug", "backend", "findings", "culprit", "found", "expected",
                              "verdict"]
    assert row.split() == ["train_test_duplicates", "torch", "DATA_LEAKAGE", "data", "data",
                           "found"]
    assert "minigrad" not in out
    assert rest[-1].startswith("score: 1/1 planted bugs found and localized")
    assert code == 0


def test_hunt_shows_progress_on_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert cli.main(["hunt", "--bug", "nonfinite_rows", "--backend", "minigrad"]) == 0
    err = capsys.readouterr().err
    assert "hunt:  50%" in err and "1/2" in err and "nonfinite_rows on minigrad: found" in err
    assert "2/2" in err and "healthy mlp (validate_data) on minigrad: clean" in err


def test_hunt_is_quiet_without_a_terminal(capsys):
    assert cli.main(["hunt", "--bug", "nonfinite_rows", "--backend", "minigrad"]) == 0
    assert capsys.readouterr().err == ""


def test_hunt_exits_nonzero_when_a_bug_is_missed(capsys, monkeypatch):
    def blind(case):
        return tools.Diagnosis("validate_data", [], None)

    monkeypatch.setitem(tools.TOOLS, "validate_data", blind)
    code = cli.main(["hunt", "--bug", "label_imbalance", "--backend", "minigrad"])
    out = capsys.readouterr().out
    assert code == 1
    assert "MISSED" in out and "score: 0/1 planted bugs" in out


def test_hunt_exits_nonzero_on_a_false_alarm(capsys, monkeypatch):
    from diagnostics import Finding

    def alarmed(case):
        return tools.Diagnosis("validate_data", [
            Finding("LABEL_IMBALANCE", "warning", "data", "imbalanced")], None)

    monkeypatch.setitem(tools.TOOLS, "validate_data", alarmed)
    code = cli.main(["hunt", "--bug", "label_imbalance", "--backend", "torch", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [o["verdict"] for o in data["outcomes"]] == ["found", "false alarm"]


def test_plain_gradhunt_runs_the_hunt(capsys, monkeypatch):
    calls = []

    def fake_hunt(**options):
        calls.append(options)
        return hunt_module.HuntResult([], 0.0)

    monkeypatch.setattr(hunt_module, "hunt", fake_hunt)
    monkeypatch.setattr("bug_injection.real_world.hunt.corpus", lambda: [])
    assert cli.DEFAULT_COMMAND == "hunt"
    assert cli.main([]) == 0
    assert calls and calls[0]["bugs"] is None
    out = capsys.readouterr().out
    assert "score: 0/0" in out and "real-world: 0/0 diagnosed at root cause" in out


@pytest.mark.parametrize("backend", ["minigrad", "torch"])
def test_inject_shows_each_step(capsys, backend):
    code = cli.main(["inject", "linear_input_transposed", "--backend", backend])
    out = capsys.readouterr().out
    for step in ("1. The bench: mixed_mlp", "2. The bug (gradient)", "Planting it changed:",
                 "3. The diagnostic: gradcheck", "4. What it reports:",
                 "5. Where it points: 2 input, transpose", "Ground truth:     2 input, transpose",
                 "Verdict: FOUND", "6. After the run: nothing stays patched."):
        assert step in out
    assert code == 0


def test_inject_list_and_unknown_name(capsys):
    assert cli.main(["inject", "--list"]) == 0
    assert "zero_init" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["inject", "no_such_bug"])
