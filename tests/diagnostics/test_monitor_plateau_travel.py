"""LOSS_PLATEAU asks for the weights to be stalled as well as the loss (probes/travel.py).

A small VAE (summed BCE of the reconstruction + KL of the latents, pytorch/examples' loss)
on 8x8 glyphs whose pixels are soft: the reconstruction term falls while the KL term rises
as the encoder starts to use its latents, and the sum holds level within 1% for a long
stretch while the weights travel far. That is a phase of training, not a stall. The same
program with a learning rate far too small is a stall: its loss is as level, its weights
barely move, and it is named.
"""
import math

import numpy as np
import pytest

from diagnostics import Monitor
from diagnostics.monitor.settings import Thresholds
from tests.diagnostics.monitor_nets import FEATURES, frameworks, mlp
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
PIXELS, HIDDEN, LATENT, BATCH = 64, 64, 8, 32


def glyphs(n, rng):
    """Ten fixed random 8x8 glyphs, each drawn with a one-pixel jitter and soft intensities."""
    prototypes = np.random.default_rng(1234).random((10, 8, 8)) < 0.25
    labels = rng.integers(0, 10, n)
    shifts = rng.integers(-1, 2, (n, 2))
    images = np.stack([np.roll(prototypes[c], tuple(s), (0, 1)) for c, s in zip(labels, shifts)])
    return (images * (0.5 + 0.5 * rng.random((n, 8, 8)))).reshape(n, PIXELS).astype(np.float32)


def vae(fw):
    nn = fw.nn

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(PIXELS, HIDDEN)
            self.mu, self.logvar = nn.Linear(HIDDEN, LATENT), nn.Linear(HIDDEN, LATENT)
            self.fc3 = nn.Linear(LATENT, HIDDEN)
            self.fc4 = nn.Linear(HIDDEN, PIXELS)
            self.relu = nn.ReLU()

        def forward(self, x, noise):
            h = self.relu(self.fc1(x))
            mu, logvar = self.mu(h), self.logvar(h)
            z = mu + noise * (logvar * 0.5).exp()
            return self.fc4(self.relu(self.fc3(z))), mu, logvar

    return VAE()


def train_vae(fw, *, lr, steps=300, thresholds=None):
    """``(report, reconstruction terms, KL terms)`` of each step under a default Monitor."""
    fw.seed(0)
    rng = np.random.default_rng(0)
    data = glyphs(2048, rng)
    model = vae(fw)
    optimizer = fw.optim.Adam(model.parameters(), lr=lr)
    bces, kls = [], []
    with Monitor(model, optimizer, thresholds=thresholds) as monitor:
        for step in range(steps):
            x = fw.inputs(data[np.arange(step * BATCH, (step + 1) * BATCH) % len(data)])
            noise = fw.inputs(rng.standard_normal((BATCH, LATENT)))
            optimizer.zero_grad()
            logits, mu, logvar = model(x, noise)
            bce = fw.F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
            kl = (logvar + 1.0 - mu * mu - logvar.exp()).sum() * -0.5
            loss = bce + kl
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            bces.append(float(bce.item()))
            kls.append(float(kl.item()))
        report = monitor.report()
    return report, np.array(bces), np.array(kls)


def _plateaus(report):
    return [f for f in report.findings + report.resolved if f.code == "LOSS_PLATEAU"]


def _median(values, start, stop):
    return float(np.median(values[start:stop]))


@pytest.mark.parametrize("fw", frameworks(), ids=lambda fw: fw.name)
def test_a_level_loss_whose_terms_trade_off_while_the_weights_travel_is_no_plateau(fw):
    report, bces, kls = train_vae(fw, lr=3e-3)
    # the program is what it claims: past the first drop, the reconstruction keeps falling,
    # the KL term keeps rising, and their sum stays level
    assert _median(bces, 250, 300) < _median(bces, 50, 100) - 10
    assert _median(kls, 250, 300) > 2 * _median(kls, 50, 100)
    assert not _plateaus(report), str(report)
    assert not [f for f in report.findings if f.severity in ("warning", "error")], str(report)
    # the loss alone is level: with the weights' evidence set aside it is called a plateau
    blind, _, _ = train_vae(fw, lr=3e-3, thresholds=Thresholds(plateau_travel=math.inf))
    assert _plateaus(blind), str(blind)


@pytest.mark.parametrize("fw", frameworks(), ids=lambda fw: fw.name)
def test_the_same_program_with_a_learning_rate_far_too_small_is_a_plateau(fw):
    report, _, _ = train_vae(fw, lr=1e-6)
    (plateau,) = _plateaus(report)
    assert plateau.severity == "warning"
    travel = plateau.evidence["weight_travel"]
    assert travel is not None and travel < Thresholds().plateau_travel / 10


@pytest.mark.parametrize("fw", frameworks(), ids=lambda fw: fw.name)
@pytest.mark.parametrize("lr", [1e-5, 1e-2])
def test_the_travel_is_the_weights_move_across_the_window_relative_to_their_norm(fw, lr):
    """Every entry moves by exactly -lr per step (SGD on the sum of the weights) while the
    reported loss is held level: the travel in the evidence is what that move gives; a
    short move is a plateau, a long one is not."""
    fw.seed(0)
    model = mlp(fw, [FEATURES, 4])
    params = list(model.parameters())
    start = np.concatenate([p.detach().numpy().reshape(-1) for p in params]).astype(np.float64)
    optimizer = fw.optim.SGD(params, lr=lr)
    x = fw.inputs(np.ones((8, FEATURES)))
    with Monitor(model, optimizer, every=1, window=10) as monitor:
        for step in range(240):
            optimizer.zero_grad()
            loss = model(x).sum() * 0.0
            for param in params:
                loss = loss + param.sum()
            loss.backward()
            optimizer.step()
            monitor.step(1.0 + 1e-4 * (step % 3))
        report = monitor.report()
    plateaus = _plateaus(report)
    if lr > 1e-3:   # moved by far more than a tenth of the weights' norm
        assert not plateaus, str(report)
        return
    (plateau,) = plateaus
    since, until = plateau.evidence["weight_travel_steps"]
    assert 0 < until - since <= plateau.evidence["steps"] + 1
    moved = (until - since) * lr * math.sqrt(start.size)
    expected = moved / np.linalg.norm(start - until * lr)
    assert plateau.evidence["weight_travel"] == pytest.approx(expected, rel=1e-3)
