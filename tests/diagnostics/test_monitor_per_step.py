"""The per-step tier (on by default): a NaN gradient or a one-step gradient spike between
sampled steps is reported at its own step; healthy runs (also a GradScaler's skipped steps)
stay quiet."""
import numpy as np
import pytest

from diagnostics import DiagnosticsError, Monitor
from tests.diagnostics.monitor_nets import (FEATURES, batches, frameworks, mlp, teacher_data)
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TORCH, MINIGRAD = frameworks()


def run(fw, *, steps, corrupt=None, per_step=True, every=50):
    """SGD on teacher data; ``corrupt(step, model)`` may change ``.grad`` before the
    optimizer's step. Returns [(step at which on_finding was called, finding)] and the report."""
    fw.seed(0)
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 32, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.05)
    alerts, step = [], 0
    with Monitor(model, optimizer, every=every, per_step_gradients=per_step,
                 on_finding=lambda f: alerts.append((step, f))) as monitor:
        for step, (xb, yb) in enumerate(batches(x, y, steps=steps)):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            if corrupt is not None:
                corrupt(step, model)
            optimizer.step()
            monitor.step(loss)
        report = monitor.report()
    return alerts, report


def grad_array(param):
    grad = param.grad
    return grad if isinstance(grad, np.ndarray) else grad.numpy()


@pytest.mark.parametrize("fw", [TORCH, MINIGRAD], ids=lambda fw: fw.name)
def test_a_nan_gradient_between_samples_is_reported_at_its_step(fw):
    def corrupt(step, model):
        if step == 7:
            grad_array(model[2].weight)[0, 0] = np.nan
    alerts, _ = run(fw, steps=12, corrupt=corrupt)
    first_step, finding = alerts[0]
    assert (first_step, finding.code, finding.severity) == (7, "EXPLODING_GRADIENTS", "error")
    assert finding.location == "2.weight" and finding.evidence["step"] == 7
    late, _ = run(fw, steps=12, corrupt=corrupt, per_step=False)
    assert late and all(step > 7 for step, _ in late)   # without the tier: a step late at best


@pytest.mark.parametrize("fw", [TORCH, MINIGRAD], ids=lambda fw: fw.name)
def test_a_one_step_spike_is_reported_at_its_step_and_stays_in_the_report(fw):
    """A gradient 1e4 times the run's usual size is no noise: the report keeps the step."""
    def corrupt(step, model):
        if step == 30:
            for param in model.parameters():
                grad_array(param)[...] *= 1e4
    alerts, report = run(fw, steps=160, corrupt=corrupt)
    spikes = [(s, f) for s, f in alerts if f.code == "EXPLODING_GRADIENTS"]
    assert spikes and spikes[0][0] == 30 and spikes[0][1].severity == "warning"
    assert spikes[0][1].evidence["gradient_norm"] > 1e3 * spikes[0][1].evidence["median_norm"]
    (kept,) = [f for f in report.findings if f.code == "EXPLODING_GRADIENTS"]
    assert kept.first_step == 30 and kept.evidence["step"] == 30


@pytest.mark.parametrize("fw", [TORCH, MINIGRAD], ids=lambda fw: fw.name)
def test_a_healthy_run_stays_quiet_with_the_tier(fw):
    alerts, report = run(fw, steps=120)
    assert [f for _, f in alerts if f.severity != "info"] == [] and report.passed


def test_skipped_amp_steps_are_not_reported_by_the_tier():
    pytest.importorskip("torch")
    from tests.diagnostics.test_monitor_mixed_precision import alarms, amp_run

    for give in (True, False):
        _, report, _, _ = amp_run(init_scale=2.0 ** 40, give_scaler=give,
                                  per_step_gradients=True)
        assert alarms(report) == [] and report.mixed_precision["skipped_steps"] > 0


def test_per_step_gradients_must_be_a_bool():
    with pytest.raises(DiagnosticsError, match="per_step_gradients"):
        Monitor(mlp(TORCH, [4, 2]), per_step_gradients="yes")
