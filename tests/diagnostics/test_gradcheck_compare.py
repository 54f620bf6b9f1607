"""compare_gradients: minigrad next to torch, and the ``gradhunt compare`` command."""
import json

import numpy as np
import pytest
import torch

import minigrad
from diagnostics import DiagnosticsError, compare_gradients
from diagnostics.gradcheck.twins import available, build_pair
from scenarios.cli import main

from .gradcheck_models import one_torch_thread, planted_op


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


@pytest.mark.parametrize("name", available())
def test_builtin_twins_agree(name):
    report = compare_gradients(*build_pair(name, seed=1))
    assert report.passed, str(report)
    assert all(p.max_abs_error < 1e-12 for p in report.parameters)
    assert report.loss_minigrad == pytest.approx(report.loss_torch, rel=1e-12)
    json.dumps(report.to_dict())


def test_cnn_twin_is_built_once_minigrad_has_conv2d():
    assert ("cnn" in available()) == hasattr(minigrad.nn, "Conv2d")


def test_a_planted_minigrad_bug_is_shown_per_parameter():
    mine, theirs, loss, inputs, targets = build_pair("mlp")

    class Spoiled(minigrad.nn.Linear):
        def forward(self, x):
            return planted_op("minigrad", "linear", "bias_mean").apply(x, self.weight, self.bias)

    spoiled = Spoiled(16, 16)
    mine._modules["2"] = spoiled
    report = compare_gradients(mine, theirs, loss, inputs, targets)
    assert not report.passed
    assert [p.name for p in report.parameters if not p.passed] == ["2.bias"]
    assert "gradients DISAGREE" in str(report) and "2.bias" in str(report)


def test_user_models_are_left_alone_and_loss_pairs_work():
    mine, theirs, _, inputs, targets = build_pair("mlp")
    before = {n: p.detach().clone() for n, p in theirs.named_parameters()}
    mine_before = {n: p.data.copy() for n, p in mine.named_parameters()}
    onehot = np.eye(3)[targets]
    report = compare_gradients(mine, theirs, (minigrad.functional.mse_loss,
                                              torch.nn.functional.mse_loss),
                               torch.tensor(inputs), onehot)
    assert report.passed
    for name, value in before.items():
        assert torch.equal(dict(theirs.named_parameters())[name], value)
        assert dict(theirs.named_parameters())[name].grad is None
    for name, value in mine_before.items():
        np.testing.assert_array_equal(dict(mine.named_parameters())[name].data, value)


def test_bad_input_is_refused():
    mine, theirs, loss, inputs, targets = build_pair("mlp")
    with pytest.raises(DiagnosticsError, match="minigrad_model: expected a minigrad.nn.Module"):
        compare_gradients(theirs, theirs, loss, inputs, targets)
    with pytest.raises(DiagnosticsError, match="loss: expected one of"):
        compare_gradients(mine, theirs, "hinge", inputs, targets)
    differ = r"shapes differ: 4.bias \(3,\) vs \(4,\), 4.weight \(3, 16\) vs \(4, 16\)"
    with pytest.raises(DiagnosticsError, match=differ):
        other = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 4))
        compare_gradients(mine, other, loss, inputs, targets)
    with pytest.raises(DiagnosticsError, match="inputs: expected a non-empty batch"):
        compare_gradients(mine, theirs, loss, inputs[:0], targets[:0])


def test_gradhunt_compare_command(capsys):
    assert main(["compare", "--model", "mlp"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[mlp] minigrad vs torch: gradients agree")
    assert main(["compare", "--json", "--seed", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == set(available()) and all(r["passed"] for r in data.values())
