"""PROBABILITIES_AS_LOGITS: a softmax at the end of the model fed to cross-entropy is named
with the loss's floor, under SGD and Adam, on torch and minigrad; legitimate probability
outputs (NLL on their log, BCE on sigmoids, squared error on them) stay quiet."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics import Monitor
from diagnostics.backends import get_backend
from diagnostics.monitor.checks.probabilities import MISFIT_TOLERANCE, cross_entropy_floor
from diagnostics.monitor.kernels import kernels_for
from diagnostics.monitor.probes.probabilities import SIMPLEX_RECHECK, OutputProbabilities
from tests.diagnostics.monitor_nets import CLASSES, FEATURES, batches, frameworks, teacher_data
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)
from tests.support.hooks import hook_state

pytestmark = pytest.mark.usefixtures("one_torch_thread")
FRAMEWORKS = frameworks()
TORCH = FRAMEWORKS[0]


def _model(fw, *, softmax):
    fw.seed(0)
    nn, F = fw.nn, fw.F

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = nn.Linear(FEATURES, 32)
            self.out = nn.Linear(32, CLASSES)

        def forward(self, x):
            logits = self.out(F.relu(self.hidden(x)))
            return F.softmax(logits, dim=1) if softmax else logits
    return Classifier()


def _found(fw, model, loss_fn, *, optimizer="adam", steps=30, every=1, targets=None,
           as_number=False):
    """The PROBABILITIES_AS_LOGITS findings; ``as_number``: ``step`` gets the loss as a float
    (no graph to read: the values alone tell)."""
    x, y = teacher_data(3)
    opt = (fw.optim.Adam(model.parameters(), lr=3e-3) if optimizer == "adam"
           else fw.optim.SGD(model.parameters(), lr=0.1))
    with Monitor(model, opt, every=every) as monitor:
        for xb, yb in batches(x, y, steps=steps, batch=32):
            opt.zero_grad()
            target = fw.labels(yb) if targets is None else targets(yb)
            loss = loss_fn(model(fw.inputs(xb)), target)
            loss.backward()
            opt.step()
            monitor.step(loss.item() if as_number else loss)
        findings = monitor.report().findings
    return [f for f in findings if f.code == "PROBABILITIES_AS_LOGITS"]


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_softmax_before_cross_entropy_is_read_from_the_graph(fw, optimizer):
    found = _found(fw, _model(fw, softmax=True), fw.F.cross_entropy, optimizer=optimizer)
    assert [f.severity for f in found] == ["error"]
    evidence = found[0].evidence
    chain = {"torch": ["NllLossBackward0", "LogSoftmaxBackward0", "SoftmaxBackward0"],
             "minigrad": ["CrossEntropyBackward", "SoftmaxBackward"]}[fw.name]
    floor = math.log(math.e + CLASSES - 1) - 1
    assert evidence["graph_chain"] == chain and evidence["classes"] == CLASSES
    assert evidence["floor"] == pytest.approx(floor) and evidence["samples"] >= 1
    assert " <- ".join(chain) in found[0].message and f"{floor:.4g}" in found[0].message
    assert "softmax is applied twice" in found[0].message
    assert "remove the softmax" in found[0].suggestion


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_softmax_before_cross_entropy_is_named_with_the_floor(fw, optimizer):
    """Without the loss tensor, from the output's values and the loss's gradient on them."""
    found = _found(fw, _model(fw, softmax=True), fw.F.cross_entropy, optimizer=optimizer,
                   as_number=True)
    assert [f.severity for f in found] == ["error"]
    evidence = found[0].evidence
    floor = math.log(math.e + CLASSES - 1) - 1
    assert evidence["classes"] == CLASSES and evidence["floor"] == pytest.approx(floor)
    assert evidence["lowest_loss"] >= floor and evidence["gradient_misfit"] < 1e-4
    assert f"{floor:.4g}" in found[0].message and "softmax is applied twice" in found[0].message
    assert "remove the softmax" in found[0].suggestion


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_the_fixed_twin_is_quiet(fw, optimizer):
    assert _found(fw, _model(fw, softmax=False), fw.F.cross_entropy, optimizer=optimizer) == []


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_softmax_into_nll_loss_is_named_with_its_negative_loss(optimizer):
    F = torch.nn.functional
    found = _found(TORCH, _model(TORCH, softmax=True), F.nll_loss, optimizer=optimizer)
    assert [f.severity for f in found] == ["warning"]
    assert found[0].evidence["highest_loss"] <= 0 and "-p[target]" in found[0].message
    assert "log_softmax" in found[0].suggestion
    fixed = torch.nn.Sequential(_model(TORCH, softmax=False), torch.nn.LogSoftmax(dim=1))
    assert _found(TORCH, fixed, F.nll_loss, optimizer=optimizer) == []


def test_the_floor_is_the_one_hot_input():
    assert cross_entropy_floor(10) == pytest.approx(1.461, abs=1e-3)
    one_hot = torch.eye(10, dtype=torch.float64)
    assert torch.nn.functional.cross_entropy(one_hot, torch.arange(10)).item() == \
        pytest.approx(cross_entropy_floor(10))


def test_legitimate_probability_outputs_stay_quiet():
    fw, F = TORCH, torch.nn.functional
    # NLL on the log of the probabilities: the right loss for a softmax output
    assert _found(fw, _model(fw, softmax=True),
                  lambda p, y: F.nll_loss(torch.log(p + 1e-12), y)) == []
    # squared error (Brier score) against one-hot targets
    assert _found(fw, _model(fw, softmax=True),
                  lambda p, y: F.mse_loss(p, F.one_hot(y, CLASSES).float())) == []
    # binary cross-entropy on sigmoid outputs (multi-label)
    sigmoid = _model(fw, softmax=False)
    assert _found(fw, torch.nn.Sequential(sigmoid, torch.nn.Sigmoid()),
                  lambda p, t: F.binary_cross_entropy(p, t),
                  targets=lambda yb: F.one_hot(torch.as_tensor(yb), CLASSES).float()) == []


def test_a_softmax_module_is_named_and_weights_and_sum_reduction_are_found():
    model = torch.nn.Sequential(_model(TORCH, softmax=False), torch.nn.Softmax(dim=1))
    weights = torch.linspace(0.5, 2.0, CLASSES)
    found = _found(TORCH, model, torch.nn.CrossEntropyLoss(weight=weights, reduction="sum"),
                   optimizer="adam")
    assert found and found[0].location == "1"


def test_a_segmentation_softmax_over_channels_is_found():
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 5, 1),
                          nn.Softmax(dim=1))
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((4, 3, 6, 6)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 5, (4, 6, 6)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(model, opt, every=1) as monitor:
        for _ in range(4):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            monitor.step(loss)
        found = [f for f in monitor.report().findings if f.code == "PROBABILITIES_AS_LOGITS"]
    assert found and found[0].evidence["classes"] == 5 and found[0].evidence["axis"] == 1


def test_no_hook_left_on_the_model_or_its_output():
    model = _model(TORCH, softmax=True)
    before = hook_state(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, FEATURES)
    with Monitor(model, opt, every=1) as monitor:
        output = model(x)                # a sampled step whose output never sees backward
        monitor.step(output.sum().detach())
        assert output._backward_hooks is None or not output._backward_hooks
    assert hook_state(model) == before


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
def test_logits_are_measured_again_only_every_few_samples_and_probabilities_always(fw):
    """Logits: the first sample measures the rows and the gradient's fit, then only the rows,
    every SIMPLEX_RECHECK-th sampled step (no hook on the output's gradient); probabilities:
    both at every sample."""
    def records(softmax, steps):
        model = _model(fw, softmax=softmax)
        opt = fw.optim.SGD(model.parameters(), lr=0.1)
        x, y = teacher_data(3)
        with Monitor(model, opt, every=1) as monitor:
            for xb, yb in batches(x, y, steps=steps, batch=32):
                opt.zero_grad()
                loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
                loss.backward()
                opt.step()
                monitor.step(loss)
            return monitor._view().signal(OutputProbabilities).records
    logits = records(False, 2 * SIMPLEX_RECHECK + 1)
    assert [r.step for r in logits] == [0, SIMPLEX_RECHECK, 2 * SIMPLEX_RECHECK]
    assert not any(r.on_simplex for r in logits)
    assert logits[0].misfit is not None and all(r.misfit is None for r in logits[1:])
    probabilities = records(True, 5)
    assert [r.step for r in probabilities] == list(range(5))
    assert all(r.on_simplex for r in probabilities)
    assert all(r.misfit is not None and r.misfit <= MISFIT_TOLERANCE for r in probabilities)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 6), classes=st.integers(2, 7), seed=st.integers(0, 2**31 - 1),
       scale=st.floats(0.1, 5.0))
def test_the_misfit_is_zero_only_for_cross_entropy_on_the_output(rows, classes, seed, scale):
    """torch and minigrad agree in float64; cross-entropy's own gradient fits, MSE's does not."""
    import minigrad
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((rows, classes)) * scale
    y = rng.integers(0, classes, rows)
    out = torch.tensor(z, requires_grad=True)
    torch.nn.functional.cross_entropy(out, torch.tensor(y)).backward()
    torch_kernels = kernels_for(get_backend(torch.nn.Linear(1, 1)))
    mini_kernels = kernels_for(get_backend(minigrad.nn.Linear(1, 1)))
    misfit, counted, spread = (float(v) for v in
                               torch_kernels.cross_entropy_misfit(out, out.grad, 1))
    assert misfit < 1e-9 and counted == rows and spread < 1e-9
    mini = [float(v) for v in mini_kernels.cross_entropy_misfit(z, out.grad.numpy(), 1)]
    assert mini == pytest.approx([misfit, counted, spread], abs=1e-9)
    # NLL's gradient picks one entry per row; cross-entropy's does not
    nll = -np.eye(classes)[y] / rows
    picked = [float(v) for v in torch_kernels.pick_misfit(torch.tensor(nll), 1)]
    assert picked == pytest.approx([0.0, rows], abs=1e-12)
    assert [float(v) for v in mini_kernels.pick_misfit(nll, 1)] == pytest.approx(picked)
    assert float(mini_kernels.pick_misfit(out.grad.numpy(), 1)[0]) > MISFIT_TOLERANCE
    # a squared error on probabilities p against one-hot targets: never counted as a fit
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    squared = 2 * (p - np.eye(classes)[y]) / z.size
    misfit, counted, spread = mini_kernels.cross_entropy_misfit(p, squared, 1)
    fits = counted > 0 and misfit <= MISFIT_TOLERANCE and (
        classes > 2 or (counted > 1 and spread <= MISFIT_TOLERANCE))
    assert not fits or np.allclose(squared, 0)
