"""Declared modules hide only their own gradient: what lies upstream of a straight-through
estimator or a gradient reversal is judged against the declared backward, so a bug there is
found and a healthy upstream passes; torch and minigrad."""
import numpy as np
import pytest
import torch

import minigrad
from diagnostics import check_gradients

from tests.support.declared_functions import REVERSE, ROUND, applying

from .gradcheck_models import FRAMEWORKS, _layers, one_torch_thread
from .tools_helpers import NN


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


def _seed(framework):
    (torch.manual_seed if framework == "torch" else minigrad.manual_seed)(0)


def _quantized(framework, bug=None):
    """Linear-Tanh-(planted Linear)-round with a straight-through backward-Linear."""
    nn = NN[framework]
    _seed(framework)
    planted = _layers(framework)["PlantedLinear"](8, 8, bug)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), planted,
                          applying(framework, ROUND[framework]), nn.Linear(8, 3))
    x = 3 * np.random.default_rng(0).standard_normal((5, 6))
    return model, nn.CrossEntropyLoss(), x, np.array([0, 1, 2, 0, 1])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_healthy_upstream_of_a_declared_estimator_is_judged_and_passes(framework):
    model, loss_fn, x, y = _quantized(framework)
    report = check_gradients(model, loss_fn, x, y, declared=[ROUND[framework]])
    assert report.passed and report.faulty == [], str(report)
    assert all(c.status == "ok" for c in report.parameters.values()), str(report)
    assert [(f.severity, f.location) for f in report.findings] == [("info", "3")]
    assert any("judged against its declared backward: 3" in n for n in report.notes)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("bug, path, faulty", [("weight_transpose", "weight", {"2.weight"}),
                                               ("input_transpose", "input",
                                                {"0.weight", "0.bias"})])
def test_a_bug_upstream_of_a_declared_estimator_is_found(framework, bug, path, faulty):
    """Used to pass, its table listing the upstream parameters WRONG as "not judged"."""
    model, loss_fn, x, y = _quantized(framework, bug)
    report = check_gradients(model, loss_fn, x, y, declared=[ROUND[framework]])
    assert not report.passed and report.culprits == ["2"], str(report)
    assert report.causes[0].path == path and report.causes[0].pattern.kind == "transpose"
    assert set(report.faulty) == faulty
    assert [f.severity for f in report.findings] == ["error", "info"]


def _reversed_features(framework, bug=None):
    """Features (with a planted layer) read by a label head and, through a gradient
    reversal, by a domain head."""
    nn = NN[framework]
    _seed(framework)

    class DANN(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(6, 8)
            self.features = _layers(framework)["PlantedLinear"](8, 8, bug)
            self.label, self.domain = nn.Linear(8, 3), nn.Linear(8, 2)
            self.grl = applying(framework, REVERSE[framework])

        def forward(self, x):
            f = self.features(self.inp(x).tanh())
            return {"logits": self.label(f), "domain": self.domain(self.grl(f))}

    ce = nn.CrossEntropyLoss()
    rng = np.random.default_rng(0)
    return (DANN(), lambda out, t: ce(out["logits"], t[0]) + ce(out["domain"], t[1]),
            rng.standard_normal((5, 6)), (np.array([0, 1, 2, 0, 1]), np.array([0, 1, 1, 0, 1])))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_upstream_of_a_declared_reversal_is_judged_against_minus_one(framework):
    model, loss_fn, x, t = _reversed_features(framework)
    report = check_gradients(model, loss_fn, x, t, declared=["grl"])
    assert report.passed and all(c.status == "ok" for c in report.parameters.values())
    model, loss_fn, x, t = _reversed_features(framework, "weight_transpose")
    report = check_gradients(model, loss_fn, x, t, declared=["grl"])
    assert not report.passed and report.culprits == ["features"], str(report)
    assert report.faulty == ["features.weight"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_declared_module_reading_more_than_its_inputs_leaves_upstream_unjudged(framework):
    """Its output depends on another module's weight, so the surrogate (recorded output
    plus the declared backward's linear map of its inputs) would miss a path: no surrogate,
    and the upstream, wrong through the declared backward, is not judged (no false alarm)."""
    nn = NN[framework]
    _seed(framework)
    function = ROUND[framework]

    class ScaledRound(nn.Module):
        def __init__(self, peer):
            super().__init__()
            self.peers = [peer]            # another module's weight, read in forward

        def forward(self, x):
            return function.apply(x) * (self.peers[0].weight * 0 + 1).mean()

    first = nn.Linear(6, 8)
    model = nn.Sequential(first, nn.Tanh(), nn.Linear(8, 8), ScaledRound(first), nn.Linear(8, 3))
    x = 3 * np.random.default_rng(0).standard_normal((5, 6))
    report = check_gradients(model, nn.CrossEntropyLoss(), x, np.array([0, 1, 2, 0, 1]),
                             declared=["3"])
    assert report.passed, str(report)
    assert any("are not judged: 3" in n for n in report.notes)


# ----------------------------------------------- an undeclared reversal, reported once
class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


class _MgDouble(minigrad.Function):
    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


DOUBLE = {"torch": _Double, "minigrad": _MgDouble}


def _dann(framework, *, doubled_label=False):
    """Features read by a label head and, through an undeclared reversal, a domain head;
    ``doubled_label``: a real bug in the model's own code, on the label branch."""
    nn = NN[framework]
    _seed(framework)

    class DANN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Linear(6, 8), nn.Tanh())
            self.label, self.domain = nn.Linear(8, 3), nn.Linear(8, 2)
            self.grl = applying(framework, REVERSE[framework])

        def forward(self, x):
            f = self.features(x)
            read = DOUBLE[framework].apply(f) if doubled_label else f
            return {"logits": self.label(read), "domain": self.domain(self.grl(f))}

    ce = nn.CrossEntropyLoss()
    rng = np.random.default_rng(0)
    return (DANN(), lambda out, t: ce(out["logits"], t[0]) + ce(out["domain"], t[1]),
            rng.standard_normal((5, 6)), (np.array([0, 1, 2, 0, 1]), np.array([0, 1, 1, 0, 1])))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_an_undeclared_gradient_reversal_is_reported_once_with_the_declared_call(framework):
    """Used to be two errors: the layer's "sign flip (factor -1)" and the model's own code
    "unexplained" (the features feed a right branch and the reversed one)."""
    report = check_gradients(*_dann(framework))
    assert not report.passed and report.culprits == ["grl"], str(report)
    (finding,) = report.findings
    assert (finding.code, finding.severity, finding.location) == (
        "GRADIENT_MISMATCH", "warning", "grl")
    assert finding.evidence["likely_reversal"] and "gradient reversal" in finding.message
    assert "declared=['grl']" in finding.suggestion
    assert "unexplained" not in str(report)
    assert set(report.causes[0].affected) == {"features.0.weight", "features.0.bias"}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_real_bug_where_the_reversed_features_branch_is_still_its_own_culprit(framework):
    report = check_gradients(*_dann(framework, doubled_label=True))
    assert set(report.culprits) == {"grl", ""}, str(report)
    own = next(f for f in report.findings if f.location == "")
    assert own.severity == "error" and not own.evidence["likely_reversal"]


def test_a_sign_flip_in_a_real_derivative_stays_an_error_and_names_the_declared_call():
    from .gradcheck_models import build

    report = check_gradients(*build("torch", "tanh", bug="sign"))
    finding = report.findings[0]
    assert finding.severity == "error" and not finding.evidence["likely_reversal"]
    assert "declared=['1']" in finding.suggestion
