"""Loss shape checks on a loss without a floor at 0 (it has been below 0): a policy-gradient
surrogate that wanders around 0 while the reward climbs is not LOSS_DIVERGING, oscillating or
a plateau; a signed loss that runs away far beyond its own spread still diverges, and a
cross-entropy that climbs is still LOSS_DIVERGING (the ratio rules, unchanged)."""
import numpy as np
import pytest

from diagnostics import Monitor
from tests.diagnostics.monitor_nets import frameworks, one_torch_thread  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(params=frameworks(), ids=lambda fw: fw.name)
def fw(request):
    request.param.seed(0)
    return request.param


def _watched(fw, losses):
    """A Monitor over a small model called once per step, handed ``losses`` one by one."""
    model = fw.nn.Sequential(fw.nn.Linear(4, 8), fw.nn.ReLU(), fw.nn.Linear(8, 2))
    optimizer = fw.optim.SGD(model.parameters(), lr=0.0)
    x = fw.inputs(np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32))
    with Monitor(model, optimizer) as monitor:
        for value in losses:
            model(x)
            monitor.step(float(value))
    return {f.code for f in monitor.report().findings if f.severity != "info"}


SHAPES = {"LOSS_DIVERGING", "LOSS_OSCILLATING", "LOSS_PLATEAU"}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_policy_gradient_surrogate_that_rises_towards_zero_is_not_judged(fw, seed):
    """REINFORCE with normalised returns: the surrogate starts well below 0 and drifts up to
    about 0 as the policy becomes certain, swinging with each batch of episodes."""
    rng = np.random.default_rng(seed)
    steps = np.arange(300)
    losses = -4.0 * np.exp(-steps / 60) + rng.normal(0, 1.0, steps.size)
    assert not _watched(fw, losses) & SHAPES


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_actor_critic_loss_that_swings_across_zero_is_not_judged(fw, seed):
    rng = np.random.default_rng(seed)
    losses = 0.3 + rng.normal(0, 1.5, 300) * np.linspace(1, 0.3, 300)
    assert not _watched(fw, losses) & SHAPES


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_signed_loss_that_runs_away_still_diverges(fw, seed):
    """A Gaussian NLL at a learning rate too high: from about -2, then growing without end."""
    rng = np.random.default_rng(seed)
    steps = np.arange(200)
    losses = -2.0 + 0.1 * rng.normal(size=steps.size) + np.where(steps > 80,
                                                                 1.08 ** (steps - 80), 0.0)
    assert "LOSS_DIVERGING" in _watched(fw, losses)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_cross_entropy_that_climbs_still_diverges(fw, seed):
    rng = np.random.default_rng(seed)
    steps = np.arange(200)
    losses = np.abs(1.4 - 0.5 * steps / 60 + np.where(steps > 60, (steps - 60) / 20, 0.0)
                    + 0.05 * rng.normal(size=steps.size))
    assert "LOSS_DIVERGING" in _watched(fw, losses)
