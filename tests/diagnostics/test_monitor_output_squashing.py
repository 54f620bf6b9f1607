"""SATURATED_ACTIVATIONS judges hidden layers: an output sigmoid under BCE that learned dark
pixels (most outputs near 0) is quiet, on torch and minigrad; hidden sigmoids with large
weights in front of the same output still saturate and are found, at the hidden layer only."""
import numpy as np
import pytest

from diagnostics import Monitor
from tests.diagnostics.monitor_nets import frameworks, one_torch_thread  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(params=frameworks(), ids=lambda fw: fw.name)
def fw(request):
    request.param.seed(0)
    return request.param


def _sparse_images(n=256, pixels=32, patterns=8, seed=0):
    """Copies of a few binary patterns with about one pixel in eight on: mostly-zero
    targets that an autoencoder can learn."""
    rng = np.random.default_rng(seed)
    prototypes = (rng.random((patterns, pixels)) < 0.12).astype(np.float32)
    return prototypes[rng.integers(0, patterns, n)]


def _bce(p, y):
    p = p.clamp(1e-7, 1 - 1e-7)
    return -(y * p.log() + (1 - y) * (1 - p).log()).mean()


def _reconstruct(fw, model, *, steps=150, lr=2e-2):
    """Train ``model`` to reconstruct the sparse images with BCE; the report and the
    losses."""
    x = _sparse_images()
    optimizer = fw.optim.Adam(model.parameters(), lr=lr)
    losses = []
    with Monitor(model, optimizer, every=5) as monitor:
        for step in range(steps):
            xb = fw.inputs(x[(np.arange(32) + 32 * step) % len(x)])
            optimizer.zero_grad()
            loss = _bce(model(xb), xb)
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            losses.append(float(loss.item()))
    return monitor.report(), losses


def _saturated(report):
    return sorted(f.location for f in report.findings if f.code == "SATURATED_ACTIVATIONS")


def test_an_output_sigmoid_under_bce_on_mostly_zero_pixels_is_quiet(fw):
    nn = fw.nn
    model = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 32), nn.Sigmoid())
    report, losses = _reconstruct(fw, model)
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])     # it learned
    squashed = report.layers[-1]
    assert squashed.name == "3" and squashed.saturated_fraction > 0.3   # at the flat end...
    assert _saturated(report) == []                                     # ...by right


def test_hidden_sigmoids_with_large_weights_are_still_found_and_not_the_output(fw):
    nn = fw.nn
    model = nn.Sequential(nn.Linear(32, 16), nn.Sigmoid(), nn.Linear(16, 16), nn.Sigmoid(),
                          nn.Linear(16, 32), nn.Sigmoid())
    for index in (0, 2):
        fw.nn.init.normal_(model[index].weight, 0.0, 6.0)
    report, _ = _reconstruct(fw, model, steps=20, lr=1e-4)
    assert _saturated(report) == ["1", "3"]
