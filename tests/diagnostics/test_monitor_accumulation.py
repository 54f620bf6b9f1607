"""ACCUMULATION_DISCARDED: zero_grad between the backward passes of one optimizer step, on the
bug, its fixed twin, plain loops and loops with two passes per step (SAM, GANs)."""
import pytest

from diagnostics import Monitor
from tests.diagnostics.monitor_nets import (FEATURES, batches, frameworks, mlp,
                                            one_torch_thread, teacher_data)  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(params=frameworks(), ids=lambda fw: fw.name)
def fw(request):
    request.param.seed(0)
    return request.param


def _run(fw, *, micro, zero_inside=False, zero_at=(), steps=12):
    """``micro`` backward passes per optimizer step; ``zero_inside``: zero_grad before each;
    ``zero_at``: extra zero_grad before these micro-batch indices (an epoch start)."""
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.05)
    micro_batches = batches(x, y, steps=steps * micro, batch=8)
    with Monitor(model, optimizer) as monitor:
        optimizer.zero_grad()
        for index, (xb, yb) in enumerate(micro_batches):
            if zero_inside or index in zero_at:
                optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            (loss * (1.0 / micro)).backward()
            if (index + 1) % micro == 0:
                optimizer.step()
                optimizer.zero_grad()
                monitor.step(loss)
    return monitor.report(), model


def _codes(report):
    return [f.code for f in report.findings if f.severity != "info"]


def test_zero_grad_inside_the_micro_batch_loop_is_an_error(fw):
    report, _ = _run(fw, micro=4, zero_inside=True)
    found = [f for f in report.findings if f.code == "ACCUMULATION_DISCARDED"]
    assert len(found) == 1 and found[0].severity == "error"
    evidence = found[0].evidence
    assert (evidence["backward_passes"], evidence["discarded_passes"]) == (4, 3)
    assert evidence["dropping_steps"] == evidence["steps"] == 12
    assert "applied 1 of the 4 backward passes" in found[0].message


def test_healthy_accumulation_is_quiet(fw):
    report, _ = _run(fw, micro=4)
    assert "ACCUMULATION_DISCARDED" not in _codes(report)


def test_a_zero_grad_at_epoch_starts_that_drops_unfinished_windows_is_found(fw):
    report, _ = _run(fw, micro=4, zero_at=(10, 22, 34), steps=12)
    found = [f for f in report.findings if f.code == "ACCUMULATION_DISCARDED"]
    assert len(found) == 1
    assert found[0].evidence["discarded_passes"] == 2
    assert found[0].evidence["dropping_steps"] == 3


def test_one_backward_per_step_and_two_per_step_are_quiet(fw):
    for micro in (1, 2):                    # two passes with a clear between: SAM, GANs
        report, _ = _run(fw, micro=micro, zero_inside=True)
        assert "ACCUMULATION_DISCARDED" not in _codes(report)


def test_no_hook_is_left_after_close():
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(model, optimizer, every=1000) as monitor:
        for _ in range(3):
            optimizer.zero_grad()
            loss = model(torch.randn(4, 4)).pow(2).mean()
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    assert not model[2].bias._backward_hooks
    assert not optimizer._optimizer_step_pre_hooks
