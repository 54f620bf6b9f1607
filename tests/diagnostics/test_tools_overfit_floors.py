"""Losses that cannot reach 0 on one batch by design: a constant or KL-like term, a forward that
samples (a VAE), a network that train_step trains against the loss (a GAN). Healthy ones are
not failed (a floor-relative target, or an inconclusive run with an info finding); a model
that cannot learn still fails with an error OVERFIT_FAILED, on the same losses."""
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import minigrad
from diagnostics import overfit_one_batch, preflight
from diagnostics.backends import get_backend
from diagnostics.batch import Batch
from diagnostics.tools import objective
from diagnostics.tools.overfit import NOISY_FRACTION

from .tools_helpers import FRAMEWORKS, NN, OPTIM, assert_same, capture, mlp, tensor


def regression_data(rows=16, features=8, outputs=4, seed=0):
    """Inputs and standardised targets from a random tanh teacher: learnable, float32."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, features)).astype(np.float32)
    y = np.tanh(x @ rng.standard_normal((features, outputs)))
    return x, ((y - y.mean(0)) / y.std(0)).astype(np.float32)


def mse_plus(framework, constant):
    mse = NN[framework].MSELoss()
    return lambda output, targets: mse(output, targets) + constant


class TorchNoise(torch.nn.Module):
    """Adds sigma * N(0, 1) in training: a forward that samples, like a VAE's latent."""

    def __init__(self, sigma):
        super().__init__()
        self.sigma = sigma

    def forward(self, x):
        return x + self.sigma * torch.randn_like(x) if self.training else x


class MinigradNoise(minigrad.nn.Module):
    def __init__(self, sigma):
        super().__init__()
        self.sigma = sigma

    def forward(self, x):
        return x + minigrad.randn(*x.shape) * self.sigma if self.training else x


def noisy_mlp(framework, sigma=0.3):
    model = mlp(framework, (8, 32, 4))
    noise = TorchNoise(sigma) if framework == "torch" else MinigradNoise(sigma)
    return NN[framework].Sequential(*model, noise)


def break_it(framework, model, how):
    """A planted non-learning model: ``"dead"``, every hidden ReLU off for every input, or
    ``"zero_lr"``, an optimizer that does not move; returns the optimizer to pass."""
    if how == "dead":
        bias = model[0].bias
        if framework == "torch":
            with torch.no_grad():
                bias.fill_(-50.0)
        else:
            bias.data[...] = -50.0
        return None
    return OPTIM[framework].SGD(model.parameters(), lr=0.0)


# ------------------------------------------------------------------ a floor above 0
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_loss_with_a_constant_floor_is_judged_from_its_floor_and_passes(framework):
    x, y = regression_data()
    result = overfit_one_batch(mlp(framework, (8, 32, 4)), mse_plus(framework, 1.0), x, y)
    start = min(result.initial_loss, float(np.mean(y.astype(np.float64) ** 2)) + 1.0)
    assert result.target_loss == pytest.approx(1.0 + 0.05 * (start - 1.0), rel=1e-4)
    assert result.passed and not result.inconclusive and result.steps is not None
    assert result.findings == [] and result.final_loss <= result.target_loss


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("how", ["dead", "zero_lr"])
def test_a_model_that_cannot_learn_still_fails_on_a_floored_loss(framework, how):
    x, y = regression_data()
    model = mlp(framework, (8, 32, 4))
    optimizer = break_it(framework, model, how)
    result = overfit_one_batch(model, mse_plus(framework, 1.0), x, y, optimizer=optimizer,
                               steps=60)
    assert not result.passed and not result.inconclusive
    (finding,) = result.findings
    assert finding.code == "OVERFIT_FAILED" and finding.severity == "error"


@given(constant=st.floats(0.01, 10.0), weight=st.floats(0.1, 10.0))
def test_the_floor_of_a_scaled_squared_error_plus_a_constant_is_the_constant(constant, weight):
    x, y = regression_data()
    model = mlp("minigrad", (8, 4))
    mse = minigrad.nn.MSELoss()
    backend = get_backend(model)
    batch = Batch.prepare(backend, lambda out, t: mse(out, t) * weight + constant, x, y)
    output = batch.forward(model)
    floor = objective.ideal_floor(backend, batch, output, None, output.data, y)
    assert floor == pytest.approx(constant, rel=1e-5)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_targets_as_logits_are_no_floor_for_a_loss_that_goes_lower_there(framework):
    """BCE with logits on 0/1 targets: logits equal to the targets score about 0.5, but larger
    logits score lower, so that is no floor and the target stays 5% of the start."""
    x, y = regression_data()
    y = (y > 0).astype(np.float32)
    model = mlp(framework, (8, 4))
    backend = get_backend(model)
    batch = Batch.prepare(backend, NN[framework].BCEWithLogitsLoss(), x, y)
    output = batch.forward(model)
    logits = backend.to_numpy(output)
    assert objective.ideal_floor(backend, batch, output, None, logits, y) == 0.0


# ------------------------------------------------------------------ a forward that samples
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_sampling_forward_is_inconclusive_not_failed(framework):
    x, y = regression_data()
    model = noisy_mlp(framework)
    before = capture(model)
    result = overfit_one_batch(model, NN[framework].MSELoss(), x, y)
    assert_same(before, capture(model))
    assert result.passed and result.inconclusive and result.steps is None
    (finding,) = result.findings
    assert finding.code == "OVERFIT_FAILED" and finding.severity == "info"
    assert "the same parameters give losses from" in finding.message
    draws = finding.evidence["draws"]
    assert len(draws) == objective.NOISE_DRAWS and max(draws) > min(draws)
    level, start = finding.evidence["level"], finding.evidence["start_level"]
    assert level <= NOISY_FRACTION * start          # it did fall most of the way
    assert str(result).startswith("overfit one batch: INCONCLUSIVE after")
    assert result.to_dict()["inconclusive"] is True


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("how", ["dead", "zero_lr"])
def test_a_sampling_forward_that_cannot_learn_still_fails(framework, how):
    x, y = regression_data()
    model = noisy_mlp(framework)
    optimizer = break_it(framework, model, how)
    result = overfit_one_batch(model, NN[framework].MSELoss(), x, y, optimizer=optimizer,
                               steps=60)
    assert not result.passed and not result.inconclusive
    (finding,) = result.findings
    assert finding.code == "OVERFIT_FAILED" and finding.severity == "error"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_preflight_skips_the_item_for_a_sampling_forward_and_fails_it_when_broken(framework):
    x, y = regression_data()
    report = preflight(noisy_mlp(framework), NN[framework].MSELoss(), x, y)
    item = report.item("overfit one batch")
    assert item.status == "SKIP" and report.passed
    assert [(f.code, f.severity) for f in item.findings] == [("OVERFIT_FAILED", "info")]
    assert "overfit one batch: INCONCLUSIVE" in report.verdict

    model = noisy_mlp(framework)
    break_it(framework, model, "dead")
    report = preflight(model, NN[framework].MSELoss(), x, y)
    item = report.item("overfit one batch")
    assert item.status == "FAIL" and not report.passed
    assert [(f.code, f.severity) for f in item.findings] == [("OVERFIT_FAILED", "error")]

    model = noisy_mlp(framework)        # the model learns, the optimizer given does not
    optimizer = OPTIM[framework].SGD(model.parameters(), lr=0.0)
    (finding,) = preflight(model, NN[framework].MSELoss(), x, y,
                           optimizer=optimizer).item("overfit one batch").findings
    assert finding.severity == "warning" and "comes down to the loss's own floor" in finding.message


def test_identical_draws_are_no_noise():
    assert not objective.samples([2.5] * 5)
    assert objective.samples([2.5, 2.5, 2.6])
    assert not objective.samples([2.5, float("nan")])


# ------------------------------------------------------------------ an opponent
class TinyGAN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.generator = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(),
                                             torch.nn.Linear(16, 2))
        self.discriminator = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.LeakyReLU(0.2),
                                                 torch.nn.Linear(16, 1))

    def forward(self, z, real):
        return torch.cat([self.discriminator(real), self.discriminator(self.generator(z))], 1)


def d_loss(output, targets):
    return torch.nn.functional.binary_cross_entropy_with_logits(output, targets)


def gan(d_lr=2e-3):
    """D's loss and optimizer as the user watches them; train_step also trains G against D
    with G's own optimizer (the non-saturating loss)."""
    model = TinyGAN()
    d_opt = torch.optim.Adam(model.discriminator.parameters(), lr=d_lr, betas=(0.5, 0.999))
    g_opt = torch.optim.Adam(model.generator.parameters(), lr=2e-3, betas=(0.5, 0.999))

    def train_step(model, batch, optimizer):
        (z, real), targets = batch
        optimizer.zero_grad()
        fake = model.generator(z).detach()
        loss = d_loss(torch.cat([model.discriminator(real), model.discriminator(fake)], 1),
                      targets)
        loss.backward()
        optimizer.step()
        g_opt.zero_grad()
        fooled = model.discriminator(model.generator(z))
        torch.nn.functional.binary_cross_entropy_with_logits(
            fooled, torch.ones_like(fooled)).backward()
        g_opt.step()
        return loss
    g = torch.Generator().manual_seed(1)
    inputs = (torch.randn(32, 2, generator=g), torch.randn(32, 2, generator=g) * 0.1 + 1.0)
    targets = torch.tensor([[1.0, 0.0]]).expand(32, 2).contiguous()
    return model, d_opt, train_step, inputs, targets


def test_a_network_trained_against_the_loss_makes_overfitting_inconclusive():
    model, d_opt, train_step, inputs, targets = gan()
    before = capture(model, d_opt)
    result = overfit_one_batch(model, d_loss, inputs, targets, optimizer=d_opt,
                               train_step=train_step)
    assert_same(before, capture(model, d_opt))
    assert result.passed and result.inconclusive
    (finding,) = result.findings
    assert finding.code == "OVERFIT_FAILED" and finding.severity == "info"
    assert "train_step also trains generator.0.weight" in finding.message
    opponent = finding.evidence["opponent"]
    assert opponent["raised_at"] >= 0.75 * opponent["measured_steps"] >= 0.75 * 5
    assert finding.evidence["held_still_final_loss"] <= result.target_loss

    report = preflight(model, d_loss, inputs, targets, optimizer=d_opt, train_step=train_step)
    assert report.item("overfit one batch").status == "SKIP" and report.passed


def test_a_discriminator_that_cannot_learn_still_fails_against_its_opponent():
    model, d_opt, train_step, inputs, targets = gan(d_lr=0.0)
    result = overfit_one_batch(model, d_loss, inputs, targets, optimizer=d_opt,
                               train_step=train_step)
    assert not result.passed and not result.inconclusive
    (finding,) = result.findings
    assert finding.code == "OVERFIT_FAILED" and finding.severity == "error"
    causes = finding.evidence["likely_causes"]
    assert "held still" in causes[0]     # this side does not learn even against no opponent
    assert not any(c.startswith("the loss grew") for c in causes)   # the opponent grew it


def test_a_second_optimizer_that_helps_the_loss_is_no_opponent():
    """train_step also trains the body with its own optimizer on the same loss: the body's
    update lowers the loss, so a batch the model cannot fit (the same inputs with two
    different targets) still fails."""
    x, y = regression_data(rows=8)
    x, y = np.repeat(x, 2, axis=0), np.repeat(y, 2, axis=0)
    y[1::2] *= -1.0
    model = mlp("torch", (8, 32, 4))
    head = torch.optim.Adam(model[2].parameters(), lr=3e-3)
    body = torch.optim.Adam(model[0].parameters(), lr=3e-3)
    mse = torch.nn.MSELoss()

    def train_step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        body.zero_grad()
        loss = mse(model(inputs), targets)
        loss.backward()
        optimizer.step()
        body.step()
        return loss
    result = overfit_one_batch(model, mse, tensor("torch", x), tensor("torch", y),
                               optimizer=head, train_step=train_step)
    assert not result.passed and not result.inconclusive
    assert [(f.code, f.severity) for f in result.findings] == [("OVERFIT_FAILED", "error")]
