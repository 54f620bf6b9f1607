"""A new Monitor signal is one probe and one check: the Monitor wires its hooks, its column,
its part of the view and its findings, and removes its hooks on close."""
import math
from collections.abc import Mapping
from dataclasses import dataclass

import pytest

import diagnostics.findings as findings_module
import diagnostics.monitor.checks as checks_module
import diagnostics.monitor.monitor as monitor_module
from diagnostics import Finding, Monitor
from diagnostics.monitor.probes import PROBES, Probe, Signal
from tests.diagnostics.monitor_nets import FEATURES, frameworks, mlp
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)
from tests.support.hooks import hook_state

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@dataclass(frozen=True)
class ModelCalls(Signal):
    """The toy signal: model calls per sampled step."""

    per_step: Mapping[int, int]


class _CallsProbe(Probe):
    """Model calls seen by a forward hook on sampled iterations (a toy signal)."""

    publishes = (ModelCalls,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.calls = 0
        self.per_step = {}

    def attach(self):
        return [self.ctx.backend.add_forward_hook(self.ctx.backend.model, self._hook)]

    def _hook(self, module, args, output):
        self.calls += 1

    def finish(self, sample):
        self.per_step[sample.step], self.calls = self.calls, 0

    def columns(self):
        return ("calls",)

    def fill_row(self, row, sample, view):
        row["calls"] = self.per_step[sample.step]

    def signals(self):
        return (ModelCalls(dict(self.per_step)),)


def _twice_called(view):
    calls = view.signal(ModelCalls)
    doubled = [step for step, count in calls.per_step.items() if count > 1] if calls else []
    return [Finding("TWICE_CALLED", "warning", "model", f"model called twice at {doubled}",
                    "call it once", {"steps": doubled})] if doubled else []


@pytest.mark.parametrize("fw", frameworks(), ids=lambda fw: fw.name)
def test_a_probe_and_a_check_make_a_signal(fw, monkeypatch):
    monkeypatch.setattr(monitor_module, "PROBES", PROBES + (_CallsProbe,))
    monkeypatch.setattr(checks_module, "CHECKS", checks_module.CHECKS + (_twice_called,))
    monkeypatch.setitem(findings_module.CODES, "TWICE_CALLED", "the model ran twice in a step")
    fw.seed(0)
    model = mlp(fw, [FEATURES, 8, 4])
    before = hook_state(model)
    x = fw.inputs([[0.5] * FEATURES] * 4)
    with Monitor(model, every=3) as monitor:
        for step in range(7):
            for _ in range(2 if step == 3 else 1):   # step 3 is sampled and calls twice
                loss = (model(x) ** 2).mean()
            loss.backward()
            monitor.step(loss)
    assert hook_state(model) == before
    assert monitor.history.column("step").tolist() == [0, 1, 3, 6]
    assert monitor.history.column("calls").tolist() == [1, 1, 2, 1]   # unsampled: no hook
    report = monitor.report()
    (finding,) = [f for f in report.findings if f.code == "TWICE_CALLED"]
    assert finding.evidence["steps"] == [3]
    assert all(math.isfinite(v) for v in monitor.history.column("loss"))


class _SecondCallsProbe(_CallsProbe):
    """Another probe that declares ``ModelCalls``: the view could hold only one of the two."""


def test_two_probes_publishing_one_signal_are_refused(monkeypatch):
    monkeypatch.setattr(monitor_module, "PROBES", PROBES + (_CallsProbe, _SecondCallsProbe))
    fw = frameworks()[0]
    model = mlp(fw, [FEATURES, 8, 4])
    before = hook_state(model)
    with pytest.raises(TypeError, match="ModelCalls is published by two probes, _CallsProbe "
                                        "and _SecondCallsProbe"):
        Monitor(model)
    assert hook_state(model) == before


@pytest.mark.parametrize("fw", frameworks(), ids=lambda fw: fw.name)
def test_a_check_reading_a_signal_nobody_published_gets_none(fw, monkeypatch):
    seen = []

    def reads_calls(view):
        seen.append(view.signal(ModelCalls))
        return _twice_called(view)
    monkeypatch.setattr(checks_module, "CHECKS", checks_module.CHECKS + (reads_calls,))
    monkeypatch.setitem(findings_module.CODES, "TWICE_CALLED", "the model ran twice in a step")
    fw.seed(0)
    model = mlp(fw, [FEATURES, 8, 4])
    x = fw.inputs([[0.5] * FEATURES] * 4)
    with Monitor(model, every=1) as monitor:
        for _ in range(4):
            loss = (model(x) ** 2).mean()
            loss.backward()
            loss = (model(x) ** 2).mean()     # called twice: no probe counts it here
            monitor.step(loss)
    codes = monitor.report().codes()
    assert seen and all(value is None for value in seen)
    assert "TWICE_CALLED" not in codes and "MONITOR_ERROR" not in codes


class _StrayProbe(Probe):
    """Publishes a kind it does not declare: turned off, its value kept out of the view."""

    def signals(self):
        return (ModelCalls({0: 2}),)


def test_a_probe_publishing_an_undeclared_signal_is_turned_off(monkeypatch):
    monkeypatch.setattr(monitor_module, "PROBES", PROBES + (_StrayProbe,))
    monkeypatch.setattr(checks_module, "CHECKS", checks_module.CHECKS + (_twice_called,))
    monkeypatch.setitem(findings_module.CODES, "TWICE_CALLED", "the model ran twice in a step")
    fw = frameworks()[0]
    fw.seed(0)
    model = mlp(fw, [FEATURES, 8, 4])
    x = fw.inputs([[0.5] * FEATURES] * 4)
    with Monitor(model, every=1) as monitor:
        for _ in range(3):
            loss = (model(x) ** 2).mean()
            loss.backward()
            monitor.step(loss)
        assert monitor._view().signal(ModelCalls) is None
    errors = [f for f in monitor.report().findings if f.code == "MONITOR_ERROR"]
    assert [f.evidence["part"] for f in errors] == ["its _StrayProbe (signals)"]
    assert "TWICE_CALLED" not in monitor.report().codes()


class _LastProbe(Probe):
    """Declares that its moments run after every other probe's, wherever it is listed."""

    runs_last = True

    def on_step(self, loss):
        return False


def test_a_probe_that_runs_last_is_ordered_last_wherever_it_is_listed(monkeypatch):
    monkeypatch.setattr(monitor_module, "PROBES", (_LastProbe,) + PROBES)
    fw = frameworks()[0]
    with Monitor(mlp(fw, [FEATURES, 8, 4])) as monitor:
        assert [type(p) for p in monitor._probes] == list(PROBES) + [_LastProbe]
        assert type(monitor._phases["on_step"][-1][0]) is _LastProbe
