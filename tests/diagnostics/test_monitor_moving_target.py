"""A loss that depends on tensors another optimizer keeps changing (a GAN's other player) is a
moving target: the Monitor sees those tensors (``probes/other_optimizer.py``) and does not judge
the loss's shape then; a frozen part, or a tensor edited once, leaves the loss checks on."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics import Monitor
from diagnostics.monitor.checks import loss as loss_checks
from diagnostics.monitor.probes.other_optimizer import TrainedElsewhere
from diagnostics.monitor.settings import Thresholds
from diagnostics.monitor.view import WindowView
from tests.diagnostics.monitor_nets import (
    frameworks,
    mlp,
    one_torch_thread,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
FRAMEWORKS = frameworks()
NOISE = 4


@pytest.fixture(params=FRAMEWORKS, ids=lambda fw: fw.name)
def fw(request):
    request.param.seed(0)
    return request.param


def game(fw):
    """A generator and a discriminator in one module; ``forward(z)`` is D's logit on G(z)."""
    nn = fw.nn

    class Game(nn.Module):
        def __init__(self):
            super().__init__()
            self.generator = nn.Sequential(nn.Linear(NOISE, 8), nn.Tanh(), nn.Linear(8, 2))
            self.discriminator = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))

        def forward(self, z):
            return self.discriminator(self.generator(z))
    return Game()


def play(fw, *, side, steps=8, every=1, d_every=1, d_lr=1e-2, g_lr=1e-2, watch=None,
         with_optimizer=True):
    """Alternating GAN steps on a fixed batch; the Monitor watches ``watch`` (default: the
    whole game) with ``side``'s optimizer and is given that side's loss. D steps every
    ``d_every`` iterations."""
    model = game(fw)
    rng = np.random.default_rng(0)
    z = fw.inputs(rng.standard_normal((32, NOISE)))
    real = fw.inputs(rng.standard_normal((32, 2)) + 2.0)
    ones, zeros = fw.inputs(np.ones((32, 1))), fw.inputs(np.zeros((32, 1)))
    bce = fw.F.binary_cross_entropy_with_logits
    opt_d = fw.optim.Adam(model.discriminator.parameters(), lr=d_lr)
    opt_g = fw.optim.Adam(model.generator.parameters(), lr=g_lr)
    optimizer = {"generator": opt_g, "discriminator": opt_d}[side] if with_optimizer else None
    watched = model if watch is None else getattr(model, watch)
    with Monitor(watched, optimizer, every=every) as monitor:
        for step in range(steps):
            opt_d.zero_grad()
            fake = model.generator(z).detach()
            loss_d = bce(model.discriminator(real), ones) + bce(model.discriminator(fake), zeros)
            loss_d.backward()
            if step % d_every == 0:
                opt_d.step()
            opt_g.zero_grad()
            loss_g = bce(model(z), ones)
            loss_g.backward()
            opt_g.step()
            monitor.step(loss_g if side == "generator" else loss_d)
    return monitor.report(), model


def names(module, prefix):
    return sorted(f"{prefix}.{name}" for name, _ in module.named_parameters())


def test_the_generator_loss_runs_through_a_discriminator_another_optimizer_trains(fw):
    report, model = play(fw, side="generator")
    assert sorted(report.loss["trained_elsewhere"]) == names(model.discriminator,
                                                             "discriminator")
    assert "its shape is not judged" in str(report)


def test_the_discriminator_sees_the_generator_that_another_optimizer_trains(fw):
    """D's loss graph stops at G(z).detach(); G's parameters are the model's, outside D's
    optimizer, and they change."""
    report, model = play(fw, side="discriminator")
    assert sorted(report.loss["trained_elsewhere"]) == names(model.generator, "generator")


def test_a_generator_watched_alone_sees_the_discriminator_in_its_loss_graph(fw):
    report, _ = play(fw, side="generator", watch="generator")
    assert sorted(report.loss["trained_elsewhere"]) == [
        "a tensor of shape 1", "a tensor of shape 1x8", "a tensor of shape 8",
        "a tensor of shape 8x2"]


def test_a_discriminator_watched_alone_sees_the_generator_through_its_input(fw):
    """D's own loss holds nothing of G; the G(z) it scores in the generator's step does."""
    report, _ = play(fw, side="discriminator", watch="discriminator")
    assert sorted(report.loss["trained_elsewhere"]) == [
        "a tensor of shape 2", "a tensor of shape 2x8", "a tensor of shape 8",
        "a tensor of shape 8x4"]


def test_a_critic_stepped_every_fifth_iteration_is_still_seen(fw):
    report, model = play(fw, side="generator", steps=16, d_every=5)
    assert sorted(report.loss["trained_elsewhere"]) == names(model.discriminator,
                                                             "discriminator")


def test_an_other_player_that_never_moves_is_not_a_moving_target(fw):
    """D's optimizer at lr 0: the loss is the generator's alone, and a generator whose lr is
    too low to move the loss is reported as a plateau."""
    report, _ = play(fw, side="generator", steps=150, every=10, d_lr=0.0, g_lr=1e-9)
    assert "trained_elsewhere" not in report.loss
    assert "LOSS_PLATEAU" in report.codes()


def test_without_an_optimizer_nothing_is_trained_elsewhere(fw):
    report, _ = play(fw, side="generator", with_optimizer=False)
    assert "trained_elsewhere" not in report.loss


def test_a_frozen_part_edited_once_by_hand_leaves_the_plateau_reported(fw):
    """A first layer outside the optimizer that still requires grad, scaled once by hand: the
    loss of a head whose learning rate is too low is still a plateau."""
    model = mlp(fw, [16, 32, 4])
    optimizer = fw.optim.SGD(model[2].parameters(), lr=1e-9)
    rng = np.random.default_rng(0)
    x, y = fw.inputs(rng.standard_normal((64, 16))), fw.labels(rng.integers(0, 4, 64))
    with Monitor(model, optimizer, every=10) as monitor:
        for step in range(150):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            if step == 30:
                weight = model[0].weight
                with fw.no_grad():
                    if fw.name == "torch":
                        weight.mul_(1.001)
                    else:
                        weight.data *= 1.001
    report = monitor.report()
    assert "trained_elsewhere" not in report.loss
    assert "LOSS_PLATEAU" in report.codes()


# ------------------------------------------------------------------ the checks themselves
SHAPE_CHECKS = (loss_checks.loss_diverging, loss_checks.loss_oscillating,
                loss_checks.loss_plateau, loss_checks.loss_at_chance)


def view(losses, elsewhere):
    return WindowView(step=len(losses), every=1, samples=[], losses=np.asarray(losses),
                      layout=None, thresholds=Thresholds(),
                      signals=(TrainedElsewhere(tuple(elsewhere)),) if elsewhere else ())


@settings(max_examples=60, deadline=None)
@given(level=st.floats(0.01, 10.0), trend=st.floats(-0.99, 3.0),
       noise=st.floats(0.0, 1.0), steps=st.integers(60, 400), seed=st.integers(0, 2 ** 16))
def test_a_moving_target_has_no_shape_finding_and_keeps_its_nan(level, trend, noise, steps,
                                                                 seed):
    rng = np.random.default_rng(seed)
    losses = level * (1 + trend * np.linspace(0, 1, steps)) \
        * (1 + noise * rng.uniform(-1, 1, steps))
    if seed % 3 == 0:
        losses[steps // 2:] = np.nan
    for check in SHAPE_CHECKS:
        assert check(view(losses, ["discriminator.0.weight"])) == []
    assert [f.code for f in loss_checks.nan_loss(view(losses, ["d.0.weight"]))] == \
        [f.code for f in loss_checks.nan_loss(view(losses, []))]


def test_the_same_curve_without_a_moving_target_is_judged():
    flat = 0.69 + 0.001 * np.random.default_rng(0).standard_normal(300)
    assert loss_checks.loss_plateau(view(flat, []))
    assert loss_checks.loss_plateau(view(flat, ["discriminator.0.weight"])) == []
