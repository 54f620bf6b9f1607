"""Planted wrong backwards on torch and minigrad: each named as culprit, with path and pattern."""
import json

import numpy as np
import pytest

from diagnostics import GradientReport, check_gradients

from .gradcheck_models import FRAMEWORKS, build, one_torch_thread


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield

# (model kind, bug, culprit, path, pattern kind)
PLANTED = [
    ("mlp", "input_transpose", "2", "input", "transpose"),
    ("mlp", "weight_transpose", "2", "weight", "transpose"),
    ("mlp", "bias_mean", "2", "bias", "mean instead of sum"),
    ("mlp", "weight_last_row", "2", "weight", "zeroed"),
    ("tanh", "sign", "1", "input", "sign flip"),
    ("tanh", "plus", "1", "input", "unexplained"),
    ("residual", "input_transpose", "1.fc1", "input", "transpose"),
    ("residual", "skip_sign", "1", "input", "unexplained"),
    ("cnn", "weight_double", "3", "weight", "scale"),
    ("cnn", "input_sign", "3", "input", "sign flip"),
    ("cnn", "triple", "2", "input", "scale"),       # max-pool between ReLU zeros (ties)
    ("layernorm", "input_terms", "1", "input", "unexplained"),
    ("loss", "half", "loss", "input", "scale"),
    ("twice", "sign", "act", "input", "sign flip"),
]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("kind, bug, culprit, path, pattern", PLANTED,
                         ids=[f"{k}-{b}" for k, b, *_ in PLANTED])
def test_planted_bug_is_named_with_its_path_and_pattern(framework, kind, bug, culprit, path,
                                                         pattern):
    model, loss_fn, inputs, targets = build(framework, kind, bug=bug)
    report = check_gradients(model, loss_fn, inputs, targets)
    assert not report.passed
    assert report.culprits == [culprit]
    cause = report.causes[0]
    assert (cause.module, cause.path, cause.pattern.kind) == (culprit, path, pattern)
    finding = report.findings[0]
    assert (finding.code, finding.severity, finding.location) == (
        "GRADIENT_MISMATCH", "error", culprit)
    assert finding.evidence["path"] == path and finding.evidence["pattern"]["kind"] == pattern


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_factors_of_scale_patterns(framework):
    conv = check_gradients(*build(framework, "cnn", bug="weight_double"))
    assert conv.causes[0].pattern.factor == pytest.approx(2.0, rel=1e-3)
    loss = check_gradients(*build(framework, "loss", bug="half"))
    assert loss.causes[0].pattern.factor == pytest.approx(0.5, rel=1e-3)
    mean = check_gradients(*build(framework, "mlp", bug="bias_mean", batch=6))
    assert mean.causes[0].pattern.factor == pytest.approx(1 / 6, rel=1e-3)
    assert "batch size 6" in str(mean.causes[0].pattern)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_input_path_bug_blames_the_layer_not_the_first_one(framework):
    """The layers before the culprit get wrong gradients too; they are listed as affected."""
    report = check_gradients(*build(framework, "mlp", bug="input_transpose"))
    assert set(report.faulty) == {"0.weight", "0.bias"}
    assert set(report.causes[0].affected) == {"0.weight", "0.bias"}
    assert report.parameters["2.weight"].status == "ok"
    # shown wrong by the directional probes; its module's output gradient is wrong, so no
    # single elements are spent on it
    assert report.parameters["0.weight"].status == "mismatch"
    assert report.parameters["0.weight"].elements_checked == 0


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_last_row_bug_in_a_large_weight_is_found_and_narrowed_down(framework):
    """Random directions weigh every element; chunks narrow the failing region to the row."""
    import minigrad
    import torch

    from .gradcheck_models import _layers

    layers = _layers(framework)
    nn = torch.nn if framework == "torch" else minigrad.nn
    (torch.manual_seed if framework == "torch" else minigrad.manual_seed)(0)
    model = nn.Sequential(nn.Linear(10, 40), nn.Tanh(),
                          layers["PlantedLinear"](40, 40, "weight_last_row"), nn.Tanh(),
                          nn.Linear(40, 3))
    rng = np.random.default_rng(0)
    loss = torch.nn.CrossEntropyLoss() if framework == "torch" else minigrad.nn.CrossEntropyLoss()
    report = check_gradients(model, loss, rng.standard_normal((6, 10)), rng.integers(0, 3, 6),
                             max_elements=16)
    assert report.faulty == ["2.weight"] and report.culprits == ["2"]
    check = report.parameters["2.weight"]
    assert check.elements_checked <= 16 and check.elements_mismatched > 0
    assert check.worst_index[0] == 39
    assert str(report.causes[0].pattern) == "zeroed (rows [39] of 40)"


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("bug, narrowed", [("weight_transpose", False),
                                           ("weight_last_row", True)])
def test_only_an_error_confined_to_part_of_a_large_tensor_is_narrowed_down(framework, bug,
                                                                          narrowed,
                                                                          monkeypatch):
    """4 random elements first: a transposed weight is wrong nearly everywhere, so they
    disagree and the rest are drawn at random, without the chunks' directional probes; a
    wrong last row hides from them, and the chunks narrow the region down to it."""
    import torch

    import minigrad
    from diagnostics.gradcheck.probing import Prober

    from .gradcheck_models import _layers

    calls = []
    suspects = Prober.suspects
    monkeypatch.setattr(Prober, "suspects",
                        lambda self, *args, **kw: calls.append(1) or suspects(self, *args, **kw))
    layers = _layers(framework)
    nn = torch.nn if framework == "torch" else minigrad.nn
    (torch.manual_seed if framework == "torch" else minigrad.manual_seed)(0)
    model = nn.Sequential(nn.Linear(10, 40), nn.Tanh(), layers["PlantedLinear"](40, 40, bug),
                          nn.Tanh(), nn.Linear(40, 3))
    rng = np.random.default_rng(0)
    loss = torch.nn.CrossEntropyLoss() if framework == "torch" else minigrad.nn.CrossEntropyLoss()
    report = check_gradients(model, loss, rng.standard_normal((6, 10)), rng.integers(0, 3, 6),
                             max_elements=16)
    assert report.faulty == ["2.weight"] and report.culprits == ["2"]
    assert bool(calls) == narrowed
    check = report.parameters["2.weight"]
    assert check.elements_mismatched == 8 and check.elements_checked <= 16


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_full_mode_checks_every_element(framework):
    report = check_gradients(*build(framework, "mlp", bug="weight_transpose"), mode="full")
    assert report.culprits == ["2"] and report.faulty == ["2.weight"]
    for check in report.parameters.values():
        assert check.elements_checked == check.size
    assert report.parameters["2.weight"].elements_mismatched > 0
    assert report.parameters["0.weight"].elements_mismatched == 0


def test_report_text_and_dict():
    report = check_gradients(*build("torch", "mlp", bug="input_transpose"))
    assert isinstance(report, GradientReport)
    text = str(report)
    assert text.startswith("Gradient check FAILED: the gradient goes wrong in '2' (PlantedLinear)")
    for expected in ("input path", "transpose", "wrong at '2' input, right at '2' output",
                     "0.weight", "WRONG", "affects"):
        assert expected in text
    data = json.loads(json.dumps(report.to_dict()))
    assert data["culprits"] == ["2"] and data["passed"] is False
    assert data["parameters"]["0.weight"]["status"] == "mismatch"
    assert data["findings"][0]["code"] == "GRADIENT_MISMATCH"
    assert data["forward_evaluations"] == report.forward_evaluations > 0


def test_same_call_gives_the_same_report():
    first = check_gradients(*build("minigrad", "mlp", bug="bias_mean"), seed=3)
    second = check_gradients(*build("minigrad", "mlp", bug="bias_mean"), seed=3)
    assert first.to_dict() == second.to_dict()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_large_culprit_tensor_stops_at_half_its_elements_disagreeing(framework):
    """The culprit's single elements are evidence, not the verdict: a tensor larger than
    max_elements stops once max_elements // 2 of them disagree (the pattern comes from
    directional probes then); the verdict is the same as with every element checked."""
    report = check_gradients(*build(framework, "mlp", bug="weight_transpose"))
    full = check_gradients(*build(framework, "mlp", bug="weight_transpose"), mode="full")
    check = report.parameters["2.weight"]
    assert check.size > 32 and check.elements_mismatched == 16 and check.elements_checked < 32
    assert report.culprits == full.culprits == ["2"] and report.faulty == full.faulty
    assert str(report.causes[0].pattern) == str(full.causes[0].pattern)
