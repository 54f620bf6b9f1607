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
    assert not optimizer._optimizer_step_post_hooks
    from torch.optim.optimizer import _global_optimizer_pre_hooks
    assert not _global_optimizer_pre_hooks


def _lbfgs_run(*, steps=8):
    """L-BFGS on a small regression: ``step(closure)`` runs zero_grad, forward and backward
    up to ``max_iter`` times inside one optimizer step."""
    import torch
    torch.manual_seed(0)
    x = torch.randn(64, 6)
    y = x @ torch.randn(6, 1) + 0.1 * torch.randn(64, 1)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=6)
    with Monitor(model, optimizer, every=1) as monitor:
        for _ in range(steps):
            def closure():
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                return loss
            monitor.step(optimizer.step(closure))
    return monitor.report()


def test_an_lbfgs_closure_evaluated_inside_the_step_discards_nothing():
    """The closure's passes run inside ``step`` (between its pre- and post-hook): L-BFGS reads
    each itself, so its zero_grad between them throws nothing away."""
    pytest.importorskip("torch")
    assert "ACCUMULATION_DISCARDED" not in _codes(_lbfgs_run())


def _gan_run(*, d_micro=1, clear_each=False, steps=10):
    """A GAN on 2-D points in pytorch/examples' dcgan order: D's zero_grad, D's real pass and
    its fake pass (``d_micro`` micro-batches each, ``clear_each``: zero_grad before every one,
    the bug), D's step; then G's pass through D (it leaves gradients in D) and G's step."""
    import torch
    from torch import nn
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.999))
    bce = nn.BCELoss()
    with Monitor(D, opt_d, every=1) as monitor:
        for _ in range(steps):
            D.zero_grad()
            for _ in range(d_micro):
                if clear_each:
                    D.zero_grad()
                real = torch.randn(16, 2) + 2
                loss_real = bce(D(real).squeeze(1), torch.ones(16))
                loss_real.backward()
                fake = G(torch.randn(16, 4))
                loss_fake = bce(D(fake.detach()).squeeze(1), torch.zeros(16))
                loss_fake.backward()
            opt_d.step()
            monitor.step(loss_real + loss_fake)
            G.zero_grad()
            bce(D(fake).squeeze(1), torch.ones(16)).backward()
            opt_g.step()
    return monitor.report()


def test_a_gan_discriminator_clearing_what_the_generator_pass_left_is_quiet():
    """G's pass through D leaves gradients in D that G's step used; D's zero_grad before its
    own passes (real, then fake, accumulated) discards none of D's."""
    pytest.importorskip("torch")
    assert "ACCUMULATION_DISCARDED" not in _codes(_gan_run())


def test_a_gan_discriminator_clearing_between_its_own_micro_batches_is_still_found():
    pytest.importorskip("torch")
    report = _gan_run(d_micro=2, clear_each=True)
    found = [f for f in report.findings if f.code == "ACCUMULATION_DISCARDED"]
    assert len(found) == 1, _codes(report)
    assert (found[0].evidence["backward_passes"], found[0].evidence["discarded_passes"]) \
        == (4, 2)
