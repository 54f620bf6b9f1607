"""A new Monitor signal is one probe and one check: the Monitor wires its hooks, its column,
its part of the view and its findings, and removes its hooks on close."""
import math

import pytest

import diagnostics.findings as findings_module
import diagnostics.monitor.checks as checks_module
import diagnostics.monitor.monitor as monitor_module
from diagnostics import Finding, Monitor
from diagnostics.monitor.probes import PROBES, Probe
from tests.diagnostics.monitor_nets import FEATURES, frameworks, mlp
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)
from tests.diagnostics.test_monitor_lifecycle import hook_state

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _CallsProbe(Probe):
    """Model calls seen by a forward hook on sampled iterations (a toy signal)."""

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

    def view_fields(self):
        return {"signals": {"calls": dict(self.per_step)}}


def _twice_called(view):
    calls = view.signals.get("calls", {})
    doubled = [step for step, count in calls.items() if count > 1]
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
