"""Findings carry the steps they were seen and are resolved once their condition stops holding:
the log's rule, a plateau-then-learn run, the callbacks, the JSONL sink and the report."""
import json
import math

import pytest

from diagnostics import DiagnosticsError, Finding, Monitor
from diagnostics.monitor import JSONLSink
from diagnostics.monitor.lifecycle import QUIET_RUNS, FindingLog
from tests.diagnostics.monitor_nets import (CLASSES, FEATURES, batches, frameworks, mlp,
                                            teacher_data)
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TORCH, MINIGRAD = frameworks()


def plateau(location="loss", severity="warning"):
    return Finding("LOSS_PLATEAU", severity, location, "flat")


def check_a(view):
    return []


def check_b(view):
    return []


# ------------------------------------------------------------------- the log's rule
def test_a_finding_records_its_first_and_last_step():
    log = FindingLog()
    assert [f.first_step for f in log.update(4, [(check_a, [plateau()])])] == [4]
    assert log.update(9, [(check_a, [plateau()])]) == []       # seen again: no transition
    (finding,) = log.active
    assert (finding.first_step, finding.last_step, finding.resolved_at) == (4, 9, None)


def test_resolved_only_after_quiet_runs_at_distinct_steps():
    log = FindingLog()
    log.update(0, [(check_a, [plateau()])])
    for _ in range(5):                            # report() called again and again at one step
        assert log.update(1, [(check_a, [])]) == []
    for step in range(2, QUIET_RUNS):
        assert log.update(step, [(check_a, [])]) == []
    (resolved,) = log.update(QUIET_RUNS, [(check_a, [])])
    assert resolved.resolved and resolved.resolved_at == 1
    assert (resolved.first_step, resolved.last_step) == (0, 0)
    assert log.active == [] and log.resolved == [resolved]


def test_a_run_of_other_checks_is_no_evidence_and_a_new_sighting_restarts_the_count():
    log = FindingLog()
    log.update(0, [(check_a, [plateau()])])
    for step in range(1, 10):                  # only check_b runs: check_a's finding holds
        log.update(step, [(check_b, [])])
    log.update(10, [(check_a, [])])
    log.update(11, [(check_a, [])])
    log.update(12, [(check_a, [plateau()])])   # it comes back before it was resolved
    for step in range(13, 13 + QUIET_RUNS - 1):
        log.update(step, [(check_a, [])])
    assert [f.last_step for f in log.active] == [12] and log.resolved == []


def test_a_finding_two_checks_produce_resolves_only_when_neither_finds_it():
    log = FindingLog()
    for step in range(QUIET_RUNS + 2):
        log.update(step, [(check_a, [plateau()] if step == 0 else []),
                          (check_b, [plateau()])])
    assert len(log.active) == 1 and log.resolved == []


def test_a_condition_that_returns_after_resolution_is_a_new_finding():
    log = FindingLog()
    log.update(0, [(check_a, [plateau()])])
    for step in range(1, QUIET_RUNS + 1):
        log.update(step, [(check_a, [])])
    (again,) = log.update(20, [(check_a, [plateau()])])
    assert again.first_step == 20 and not again.resolved
    assert [f.first_step for f in log.resolved] == [0]


def test_a_severity_that_rises_is_announced_again_and_keeps_its_first_step():
    log = FindingLog()
    log.update(3, [(check_a, [plateau()])])
    (risen,) = log.update(5, [(check_a, [plateau(severity="error")])])
    assert risen.severity == "error" and (risen.first_step, risen.last_step) == (3, 5)


def test_a_finding_seen_again_keeps_its_first_words_and_numbers():
    """The evidence of a finding is what showed it first (a stale .grad at step 1, not the
    blown-up run of step 150); the steps it held are first_step and last_step."""
    log = FindingLog()
    log.update(3, [(check_a, [Finding("LOSS_PLATEAU", "warning", "loss", "at 2.3", "",
                                      {"v": 2.3})])])
    assert log.update(8, [(check_a, [Finding("LOSS_PLATEAU", "warning", "loss", "at 1.5", "",
                                            {"v": 1.5})])]) == []   # no new announcement
    (finding,) = log.active
    assert (finding.message, finding.evidence) == ("at 2.3", {"v": 2.3})
    assert (finding.first_step, finding.last_step) == (3, 8)


def test_finding_stays_backward_compatible():
    old = Finding("LOSS_PLATEAU", "warning", "loss", "flat", "try", {"a": 1})
    assert old.first_step is None and not old.resolved
    assert set(old.to_dict()) == {"code", "severity", "location", "message", "suggestion",
                                  "evidence"}
    seen = Finding("LOSS_PLATEAU", "warning", "loss", "flat", "try", {"a": 1}, first_step=2,
                   last_step=7)
    assert seen == old                 # the same diagnosis, seen at other steps
    assert seen.to_dict()["first_step"] == 2


# ---------------------------------------------------------------- a run that learns late
def plateau_then_learn(fw, *, plateau_steps=200, steps=420, **monitor_options):
    """A classifier whose output layer starts at zero (a uniform guess) and whose learning
    rate is ~0 for ``plateau_steps`` steps (a long warm-up), then 0.5: at chance, then it
    learns. Returns the losses and the report."""
    fw.seed(0)
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 32, CLASSES])
    with fw.no_grad():
        model[2].weight.data[...] = 0
        model[2].bias.data[...] = 0
    optimizer = fw.optim.SGD(model.parameters(), lr=1e-6)
    losses = []
    with Monitor(model, optimizer, every=10, **monitor_options) as monitor:
        for step, (xb, yb) in enumerate(batches(x, y, steps=steps)):
            if step == plateau_steps:
                optimizer.param_groups[0]["lr"] = 0.5
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            losses.append(float(loss.item()))
        report = monitor.report()
    return losses, report, monitor


@pytest.mark.parametrize("fw", [TORCH, MINIGRAD], ids=lambda fw: fw.name)
def test_a_plateau_that_ends_is_resolved_in_the_final_report(fw, tmp_path):
    found, resolved = [], []
    sink = JSONLSink(tmp_path / "run.jsonl")
    losses, report, monitor = plateau_then_learn(
        fw, on_finding=found.append, on_resolved=resolved.append, sinks=[sink])
    assert losses[-1] < 0.6 * math.log(CLASSES)            # it did learn
    assert {"LOSS_PLATEAU", "LOSS_AT_CHANCE"} <= {f.code for f in found}
    assert report.findings == [] and report.passed
    codes = {f.code: f for f in report.resolved}
    assert {"LOSS_PLATEAU", "LOSS_AT_CHANCE"} <= set(codes)
    for finding in (codes["LOSS_PLATEAU"], codes["LOSS_AT_CHANCE"]):
        assert finding.first_step < 200 <= finding.resolved_at
        assert finding.first_step <= finding.last_step < finding.resolved_at
    assert {f.code for f in resolved} == {f.code for f in report.resolved}
    assert monitor.resolved == report.resolved
    text = str(report)
    assert "no findings" in text and "resolved (held for a while" in text
    assert f"LOSS_PLATEAU at loss (steps {codes['LOSS_PLATEAU'].first_step}-" in text
    events = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    transitions = [(e["event"], e["code"]) for e in events if "event" in e]
    assert ("found", "LOSS_PLATEAU") in transitions and ("resolved", "LOSS_PLATEAU") in transitions
    assert transitions.index(("found", "LOSS_PLATEAU")) < transitions.index(
        ("resolved", "LOSS_PLATEAU"))
    rows = [e for e in events if "event" not in e]
    assert len(rows) == report.sampled_steps
    assert {f["code"]: f["resolved_at"] for f in report.to_dict()["resolved"]}[
        "LOSS_PLATEAU"] == codes["LOSS_PLATEAU"].resolved_at


def test_a_plateau_that_never_ends_stays_active():
    _, report, _ = plateau_then_learn(TORCH, plateau_steps=10_000, steps=300)
    assert "LOSS_PLATEAU" in report.codes()
    assert not any(f.code.startswith("LOSS") for f in report.resolved)
    (finding,) = [f for f in report.findings if f.code == "LOSS_PLATEAU"]
    assert finding.last_step == 299 and finding.first_step < 299


def test_on_resolved_must_be_callable():
    with pytest.raises(DiagnosticsError, match="on_resolved"):
        Monitor(mlp(TORCH, [4, 2]), on_resolved="print")
