"""Healthy twins pass: ReLU and max-pool nets over several seeds, inputs sitting on kinks, abs."""
import numpy as np
import pytest
import torch

import minigrad
from diagnostics import check_gradients
from diagnostics.errors import DiagnosticsError

from .gradcheck_models import FRAMEWORKS, build, cross_entropy, one_torch_thread

SEEDS = (0, 1, 2)
KINDS = ("mlp", "tanh", "residual", "cnn", "layernorm", "loss", "twice")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("kind", KINDS)
def test_healthy_twin_passes(framework, kind):
    report = check_gradients(*build(framework, kind))
    assert report.passed, str(report)
    assert report.faulty == [] and report.culprits == [] and report.findings == []
    assert str(report).startswith("Gradient check passed")


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("seed", SEEDS)
def test_relu_mlp_and_maxpool_cnn_pass_over_seeds(framework, seed):
    for kind in ("mlp", "cnn"):
        report = check_gradients(*build(framework, kind, seed=seed, batch=8), seed=seed)
        assert report.passed, str(report)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_inputs_sitting_exactly_on_relu_kinks_pass(framework):
    """Zero inputs and a zero first bias put half the first layer's units exactly at 0."""
    model, loss_fn, inputs, targets = build(framework, "mlp", seed=3, batch=8)
    if framework == "torch":
        with torch.no_grad():
            model[0].bias.zero_()
    else:
        model[0].bias.data[...] = 0
    inputs[:4] = 0
    report = check_gradients(model, loss_fn, inputs, targets)
    assert report.passed, str(report)
    assert any("non-differentiable" in note for note in report.notes)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_maxpool_ties_on_flat_images_pass(framework):
    model, loss_fn, inputs, targets = build(framework, "cnn", seed=4, batch=6)
    inputs[:, :, :, :3] = 0      # flat regions: equal values in pooling windows
    inputs[:2] = np.round(inputs[:2])
    assert check_gradients(model, loss_fn, inputs, targets).passed


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_abs_activation_passes(framework):
    nn = torch.nn if framework == "torch" else minigrad.nn

    class Abs(nn.Module):
        def forward(self, x):
            return x.abs()

    (torch.manual_seed if framework == "torch" else minigrad.manual_seed)(5)
    model = nn.Sequential(nn.Linear(4, 6), Abs(), nn.Linear(6, 2))
    rng = np.random.default_rng(5)
    inputs = rng.standard_normal((7, 4))
    inputs[:3] = 0
    report = check_gradients(model, cross_entropy(framework), inputs, rng.integers(0, 2, 7))
    assert report.passed, str(report)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_full_mode_on_a_healthy_relu_net(framework):
    report = check_gradients(*build(framework, "mlp", seed=1), mode="full")
    assert report.passed, str(report)
    assert all(c.elements_checked + c.kinks == c.size for c in report.parameters.values())


def test_dropout_in_train_mode_is_checked_with_a_fixed_mask():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Dropout(0.5),
                                torch.nn.Tanh(), torch.nn.Linear(8, 2))
    rng = np.random.default_rng(0)
    report = check_gradients(model, torch.nn.CrossEntropyLoss(), rng.standard_normal((6, 5)),
                             rng.integers(0, 2, 6))
    assert report.passed, str(report)


def test_evaluations_grow_with_tensors_not_with_elements():
    """Directional probes: two wide layers cost about what two narrow ones do."""
    counts = []
    for width in (4, 64):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh(),
                                    torch.nn.Linear(width, 3))
        rng = np.random.default_rng(0)
        report = check_gradients(model, torch.nn.CrossEntropyLoss(),
                                 rng.standard_normal((5, width)), rng.integers(0, 3, 5))
        assert report.passed
        counts.append(report.forward_evaluations)
    assert counts[1] <= counts[0] + 8
    assert counts[1] < 2 * (64 * 64 + 64)


def test_two_inputs_integer_inputs_and_a_tuple_output():
    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(10, 4)
            self.fc = torch.nn.Linear(4 + 3, 5)
            self.head = torch.nn.Linear(5, 2)

        def forward(self, tokens, features):
            hidden = torch.tanh(self.fc(torch.cat([self.embed(tokens), features], dim=1)))
            return self.head(hidden), hidden

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    tokens, features = rng.integers(0, 10, 6), rng.standard_normal((6, 3))
    labels = rng.integers(0, 2, 6)

    def loss(outputs, targets):
        logits, hidden = outputs
        return torch.nn.functional.cross_entropy(logits, targets) + 0.1 * (hidden ** 2).mean()

    report = check_gradients(TwoHeads(), loss, (tokens, features), labels)
    assert report.passed, str(report)
    assert {"embed.weight", "fc.weight", "head.bias"} <= set(report.parameters)
    assert any(p.name == "model output 1" for p in report.points)


class _ScaledInputGrad(torch.autograd.Function):
    """Identity forward, a backward that doubles the gradient: a planted bug."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


class _Doubled(torch.nn.Module):
    def forward(self, x):
        return _ScaledInputGrad.apply(x)


def _binary(seed=0, bug=False):
    torch.manual_seed(seed)
    layers = [torch.nn.Linear(16, 32), torch.nn.Tanh()] + ([_Doubled()] if bug else [])
    model = torch.nn.Sequential(*layers, torch.nn.Linear(32, 1))
    x = torch.randn(8, 16)
    return model, x, (x[:, 0] > 0).long()


def _bce_float_targets(out, y):
    """The everyday binary loss: the int labels cast with .float() inside the loss."""
    return torch.nn.functional.binary_cross_entropy_with_logits(out.squeeze(-1), y.float())


def _focal(out, y, gamma=2.0):
    """torchvision's sigmoid focal loss: a sigmoid for p_t beside BCE with logits."""
    t = y.float().unsqueeze(-1)
    p = torch.sigmoid(out)
    ce = torch.nn.functional.binary_cross_entropy_with_logits(out, t, reduction="none")
    p_t = p * t + (1 - p) * (1 - t)
    return (ce * (1 - p_t) ** gamma).mean()


@pytest.mark.parametrize("loss_fn", [_bce_float_targets, _focal])
def test_a_loss_casting_targets_to_float32_passes_and_a_bug_behind_it_is_found(loss_fn):
    """On float64 logits, BCE with logits given float32 targets computes in float32: finite
    differences were noise and every gradient looked wrong. The check now turns the user's
    float32 casts into float64 while it runs, and puts the default dtype back."""
    model, x, y = _binary()
    report = check_gradients(model, loss_fn, x, y)
    assert report.passed, str(report)
    assert torch.get_default_dtype() == torch.float32
    model, x, y = _binary(bug=True)
    report = check_gradients(model, loss_fn, x, y)
    assert not report.passed and report.culprits == ["2"], str(report)
    assert torch.get_default_dtype() == torch.float32


def test_float32_casts_are_float64_only_inside_the_check_also_when_it_raises():
    model, x, y = _binary()

    def broken(out, y):
        raise ValueError("a loss that raises")
    with pytest.raises(DiagnosticsError, match="a loss that raises"):
        check_gradients(model, broken, x, y)
    assert torch.get_default_dtype() == torch.float32
    assert torch.ones(1).float().dtype == torch.float32


class _TwoTowers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(6, 4), torch.nn.Linear(6, 4)

    def forward(self, xa, xb):
        return self.a(xa), self.b(xb)


def _tower_loss(out, targets):
    """Regression of both towers' agreement on float targets: the loss reads both entries."""
    return ((out[0] * out[1]).sum(-1) - targets).pow(2).mean()


def test_a_loss_reading_two_outputs_with_float_targets_of_another_shape_is_checked():
    """The broadcast probe replaced the logits by a leaf and ran backward twice through the
    other output's graph ("backward through the graph a second time"); it now holds a
    constant copy of the other entries."""
    torch.manual_seed(0)
    xa, xb, targets = torch.randn(4, 6), torch.randn(4, 6), torch.randn(4)
    report = check_gradients(_TwoTowers(), _tower_loss, (xa, xb), targets)
    assert report.passed, str(report)
