"""preflight: a healthy model passes every item; each planted bug fails its own item; state is
restored bit for bit; bad arguments raise; ``gradhunt preflight FILE:factory`` runs it."""
import json
import textwrap

import numpy as np
import pytest
import torch

import minigrad
from bug_injection.planted import formulas
from bug_injection.planted.functions import spoiled_function
from diagnostics import preflight
from diagnostics.backends import get_backend
from diagnostics.errors import DiagnosticsError
from scenarios.cli import main

from .tools_helpers import (FRAMEWORKS, NN, OPTIM, assert_same, capture, classification_data,
                            cross_entropy, mlp, tensor)

ITEMS = ["parameters", "model structure", "forward", "label dtype", "shapes", "loss at init",
         "overfit one batch", "training steps", "activations", "gradient flow", "stale gradients",
         "parameters update", "gradient check", "batch independence", "reshapes",
         "label range", "label order"]


def _statuses(report):
    return {item.name: item.status for item in report.items}


def _failed(report):
    return sorted(item.name for item in report.items if item.status == "FAIL")


def _codes(report, name):
    return [finding.code for finding in report.item(name).findings]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_healthy_model_passes_every_item(framework):
    x, y = classification_data(rows=16)
    report = preflight(mlp(framework, (8, 32, 3)), cross_entropy(framework), x, y)
    assert [item.name for item in report.items] == ITEMS
    assert report.passed and report.findings == []
    assert set(_statuses(report).values()) == {"PASS", "SKIP"}
    assert _statuses(report)["stale gradients"] == "SKIP"
    assert "expected about -log(1/3) = 1.099" in report.item("loss at init").summary
    skipped = [name for name, status in _statuses(report).items() if status == "SKIP"]
    assert skipped == ["stale gradients"] or (framework == "minigrad" and skipped == [
        "stale gradients", "batch independence", "reshapes"])   # these two need torch
    assert str(report).startswith(f"preflight: {len(ITEMS) - len(skipped)} passed, "
                                  f"{len(skipped)} skipped (stale gradients: give train_step "
                                  f"to check your loop")
    assert json.loads(json.dumps(report.to_dict()))["passed"] is True


def test_the_loss_at_init_says_when_loss_fn_is_not_a_cross_entropy_over_the_classes():
    """A hand-written cross-entropy with log_softmax over the batch axis: the uninformative
    loss is -log(1/N), and the item no longer calls it -log(1/C)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5))

    def batch_axis_cross_entropy(out, y):
        return -(torch.log_softmax(out, dim=0)[torch.arange(len(y)), y]).mean()

    x, y = torch.randn(64, 6), torch.randint(0, 5, (64,))
    summary = preflight(model, batch_axis_cross_entropy, x, y).item("loss at init").summary
    assert "not -log(1/5) = 1.609" in summary and "normalizes over another axis" in summary


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_healthy_train_step_with_dropout_passes_and_state_is_restored(framework):
    x, y = classification_data(rows=16)
    nn = NN[framework]
    (torch.manual_seed if framework == "torch" else minigrad.manual_seed)(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 3))
    optimizer = OPTIM[framework].SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = cross_entropy(framework)

    def train_step(model, batch, optimizer):
        optimizer.zero_grad()
        loss = loss_fn(model(batch[0]), batch[1])
        loss.backward()
        optimizer.step()
        return loss

    train_step(model, (tensor(framework, x), tensor(framework, y)), optimizer)
    before = capture(model, optimizer)
    report = preflight(model, loss_fn, x, y, optimizer=optimizer, train_step=train_step)
    assert _statuses(report)["stale gradients"] == "PASS"
    assert _failed(report) in ([], ["gradient check"])  # dropout may make the slice random
    assert_same(before, capture(model, optimizer))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_overconfident_last_layer_is_a_bad_initial_loss(framework):
    x, y = classification_data(rows=16)
    model = mlp(framework, (8, 32, 3))
    _scale(model[2].weight, 30.0)
    report = preflight(model, cross_entropy(framework), x, y)
    assert _failed(report) == ["loss at init"]
    (finding,) = report.item("loss at init").findings
    assert finding.code == "BAD_INIT_LOSS" and finding.evidence["classes"] == 3
    assert finding.evidence["expected"] == pytest.approx(np.log(3), rel=1e-6)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("scale, flagged", [(2.0, False), (20.0, True)])
def test_regression_initial_loss_is_flagged_only_when_the_outputs_dwarf_the_targets(
        framework, scale, flagged):
    x, _ = classification_data(rows=16)
    model = mlp(framework, (8, 32, 1))
    backend = get_backend(model)
    with backend.no_grad():
        output = backend.to_numpy(backend.forward(tensor(framework, x)))
    # targets +-t with t = rms(output) / scale: MSE / mean(y**2) is at most (scale + 1)**2
    # (9 for scale 2) and at least (scale - 1)**2 (361 for scale 20)
    t = float(np.sqrt(np.mean(output ** 2))) / scale
    y = np.where(np.arange(16) % 2 == 0, t, -t).astype(np.float32)[:, None]
    report = preflight(model, NN[framework].MSELoss(), x, y)
    findings = report.item("loss at init").findings
    assert [f.code for f in findings] == (["BAD_INIT_LOSS"] if flagged else [])
    if flagged:
        assert findings[0].evidence["ratio"] > 10 and "10" in findings[0].message


def test_label_dtype_is_caught_before_torch_raises():
    x, y = classification_data(rows=16)
    report = preflight(mlp("torch"), cross_entropy("torch"), x, y.astype(np.int32))
    assert _codes(report, "label dtype") == ["LABEL_DTYPE"]
    assert "loss_fn raised RuntimeError" in report.item("loss at init").summary
    assert _statuses(report)["overfit one batch"] == "SKIP"


@pytest.mark.parametrize("labels, message", [
    (lambda y: y.astype(np.float32), "class labels are float32"),
    (lambda y: y + 1, "labels lie outside [0, 3)"),
])
def test_float_and_out_of_range_labels_are_label_dtype_errors(labels, message):
    x, y = classification_data(rows=16)
    y[0] = 2  # make sure the largest class occurs, so y + 1 reaches 3
    report = preflight(mlp("minigrad"), cross_entropy("minigrad"), x, labels(y))
    (finding,) = report.item("label dtype").findings
    assert finding.code == "LABEL_DTYPE" and message in finding.message


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_broadcasting_shapes_fail_shapes_and_overfit(framework):
    x, _ = classification_data(rows=16)
    y = np.random.default_rng(0).standard_normal(16).astype(np.float32)
    with pytest.warns(UserWarning):
        report = preflight(mlp(framework, (8, 16, 1)), NN[framework].MSELoss(), x, y)
    assert {"shapes", "overfit one batch"} <= set(_failed(report))
    (finding,) = report.item("shapes").findings
    assert finding.code == "SHAPE_BROADCAST" and finding.evidence["broadcast"] == (16, 16)


def test_missing_zero_grad_is_stale_gradients_and_missing_step_is_params_not_updating():
    x, y = classification_data(rows=16)
    loss_fn = cross_entropy("minigrad")

    def no_zero_grad(model, batch, optimizer):
        loss = loss_fn(model(batch[0]), batch[1])
        loss.backward()
        optimizer.step()
        return loss

    def no_step(model, batch, optimizer):
        optimizer.zero_grad()
        loss_fn(model(batch[0]), batch[1]).backward()  # returns nothing: preflight measures

    report = preflight(mlp("minigrad"), loss_fn, x, y, train_step=no_zero_grad)
    assert _codes(report, "stale gradients") == ["STALE_GRADIENTS"]
    assert _failed(report) == ["stale gradients"]
    report = preflight(mlp("minigrad"), loss_fn, x, y, train_step=no_step)
    assert _codes(report, "parameters update") == ["PARAMS_NOT_UPDATING"]
    assert _codes(report, "training steps") == ["LOSS_PLATEAU"]


_WrongReLU = spoiled_function("minigrad", "relu", 0, formulas.mask_half_kept)


class _WrongReLUModule(minigrad.nn.Module):
    def forward(self, x):
        return _WrongReLU.apply(x)


def test_wrong_backward_fails_the_gradient_check():
    x, y = classification_data(rows=16)
    minigrad.manual_seed(0)
    nn = minigrad.nn
    model = nn.Sequential(nn.Linear(8, 16), _WrongReLUModule(), nn.Linear(16, 3))
    report = preflight(model, cross_entropy("minigrad"), x, y)
    assert "gradient check" in _failed(report)
    assert "GRADIENT_MISMATCH" in _codes(report, "gradient check")


def test_deep_net_without_normalisation_shows_exploding_gradients():
    x, y = classification_data(rows=16)
    model = mlp("minigrad", (8,) + (32,) * 19 + (3,))  # 20 Linear layers, no normalisation
    for layer in model[::2]:
        layer.weight.data[...] *= 4.0  # about 1.6 times He scale: signals grow layer by layer
    report = preflight(model, cross_entropy("minigrad"), x, y)
    assert {"loss at init", "activations", "gradient flow"} <= set(_failed(report))
    exploding = [f for f in report.item("gradient flow").findings
                 if f.code == "EXPLODING_GRADIENTS"]
    assert exploding and exploding[0].evidence["gradient_norm"] > 1e4
    assert "clip_grad_norm_" in exploding[0].suggestion


def test_dead_relu_layer_shows_in_activations_and_fails_overfit():
    x, y = classification_data(rows=16)
    model = mlp("minigrad", (8, 32, 32, 3))
    model[2].bias.data[...] = -50.0  # the second hidden layer never fires
    report = preflight(model, cross_entropy("minigrad"), x, y)
    assert _codes(report, "activations") == ["DEAD_UNITS"]
    assert report.item("activations").findings[0].location == "3"
    causes = report.item("overfit one batch").findings[0].evidence["likely_causes"]
    assert any("no gradient reaches 0.weight, 0.bias, 2.weight, 2.bias" in c for c in causes)


def test_forward_that_raises_fails_forward_and_skips_the_rest():
    x, y = classification_data(rows=16)
    report = preflight(mlp("minigrad", (5, 4, 3)), cross_entropy("minigrad"), x, y)
    assert report.item("forward").status == "FAIL"
    assert "forward raised" in report.item("forward").summary
    after = report.items.index(report.item("forward")) + 1
    assert {item.status for item in report.items[after:]} == {"SKIP"}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_bad_arguments_raise_naming_the_argument(framework):
    x, y = classification_data(rows=8)
    model, loss = mlp(framework), cross_entropy(framework)
    other = OPTIM[framework].SGD(mlp(framework).parameters(), lr=0.1)
    cases = [
        ({"train_step": "step"}, "train_step: expected a callable"),
        ({"optimizer": "adam"}, "optimizer: expected a torch.optim"),
    ]
    for kwargs, message in cases:
        with pytest.raises(DiagnosticsError, match=message):
            preflight(model, loss, x, y, **kwargs)
    with pytest.raises(DiagnosticsError, match="targets: expected a"):
        preflight(model, loss, x, list(y))
    # issue 12: an optimizer over another model's tensors is the finding the user needs, not
    # an exception (it used to raise "optimizer: expected an optimizer over this model's ...")
    report = preflight(model, loss, x, y, optimizer=other)
    (finding,) = report.item("parameters").findings
    assert finding.code == "PARAMS_NOT_UPDATING" and finding.evidence["foreign_tensors"] == 4
    assert "not this model's parameters" in finding.message
    assert _statuses(report)["overfit one batch"] == "SKIP"
    assert "does not hold the model's parameters" in report.item("training steps").summary


FACTORY = """
import numpy as np
import minigrad

def factory():
    minigrad.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    y = np.argmax(x @ rng.standard_normal((8, 3)), axis=1)
    model = minigrad.nn.Sequential(minigrad.nn.Linear(8, 32), minigrad.nn.ReLU(),
                                   minigrad.nn.Linear(32, 3))
    return model, minigrad.nn.CrossEntropyLoss(), (x, y)

def broken():
    model, loss, (x, y) = factory()
    return {"model": model, "loss_fn": loss, "inputs": x, "targets": y.astype(np.float32)}
"""


def test_command_runs_a_factory_and_exits_by_the_verdict(tmp_path, capsys):
    path = tmp_path / "my_model.py"
    path.write_text(textwrap.dedent(FACTORY))
    assert main(["preflight", str(path)]) == 0
    assert "passed, 3 skipped (stale gradients: give train_step to check your loop; batch " \
           "independence: needs a torch model" in capsys.readouterr().out
    assert main(["preflight", f"{path}:broken", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] is False
    assert "LABEL_DTYPE" in [f["code"] for item in report["items"] for f in item["findings"]]
    assert main(["preflight", f"{path}:missing"]) == 2
    assert "FACTORY: expected a function named 'missing'" in capsys.readouterr().err
    assert main(["preflight", str(tmp_path / "nope.py")]) == 2


def _scale(weight, factor):
    if isinstance(weight, torch.Tensor):
        with torch.no_grad():
            weight.mul_(factor)
    else:
        weight.data[...] *= factor


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_slow_optimizer_is_told_apart_from_a_bug(framework):
    # SGD at lr=1e-3 cannot memorise the batch in time; Adam can: a warning about the settings
    x, y = classification_data(rows=16)
    model = mlp(framework, (8, 32, 3))
    slow = OPTIM[framework].SGD(model.parameters(), lr=1e-3)
    report = preflight(model, cross_entropy(framework), x, y, optimizer=slow)
    (finding,) = report.item("overfit one batch").findings
    assert finding.code == "OVERFIT_FAILED" and finding.severity == "warning"
    assert "SGD, lr 0.001" in finding.message
    assert "the optimizer settings are slow" in finding.message
    assert finding.evidence["adam_steps"] is not None
    # a real bug fails with Adam too, and stays an error
    model = mlp(framework, (8, 16, 3))
    _set_bias_value(model[0].bias, -50.0)
    dead = preflight(model, cross_entropy(framework), x, y,
                     optimizer=OPTIM[framework].SGD(model.parameters(), lr=1e-3))
    (finding,) = dead.item("overfit one batch").findings
    assert finding.code == "OVERFIT_FAILED" and finding.severity == "error"


def _set_bias_value(bias, value):
    if isinstance(bias, torch.Tensor):
        with torch.no_grad():
            bias.fill_(value)
    else:
        bias.data[...] = value


class _TemperedLoss(torch.nn.Module):
    """CLIP-style: a learnable temperature in the loss module, trained by the same optimizer."""

    def __init__(self):
        super().__init__()
        self.log_scale = torch.nn.Parameter(torch.tensor(0.5))

    def forward(self, logits, targets):
        return torch.nn.functional.cross_entropy(logits * self.log_scale.exp(), targets)


def test_a_learnable_tensor_outside_the_model_in_the_optimizer_passes_and_is_restored():
    """Every trainable parameter held, plus one more: healthy, not PARAMS_NOT_UPDATING; the
    training items step it, and preflight puts its value and gradient back."""
    x, y = classification_data(rows=16)
    x, y = tensor("torch", x), tensor("torch", y)
    torch.manual_seed(0)
    model, loss_fn = mlp("torch"), _TemperedLoss()
    optimizer = torch.optim.Adam([*model.parameters(), *loss_fn.parameters()], lr=3e-3)
    before = loss_fn.log_scale.detach().clone()
    report = preflight(model, loss_fn, x, y, optimizer=optimizer)
    assert report.item("parameters").status == "PASS", str(report)
    assert "1 tensor(s) outside the model" in report.item("parameters").summary
    assert _statuses(report)["training steps"] == "PASS", str(report)
    assert torch.equal(loss_fn.log_scale.detach(), before) and loss_fn.log_scale.grad is None


def test_an_optimizer_that_misses_a_replaced_layer_is_still_flagged():
    """The optimizer built, then a layer replaced: it holds the old layer's tensors (outside
    the model) and lacks the new one's."""
    x, y = classification_data(rows=16)
    x, y = tensor("torch", x), tensor("torch", y)
    model = mlp("torch")
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    last = len(model) - 1
    model[last] = torch.nn.Linear(model[last].in_features, model[last].out_features)
    report = preflight(model, cross_entropy("torch"), x, y, optimizer=optimizer)
    assert _codes(report, "parameters") == ["PARAMS_NOT_UPDATING"], str(report)
    assert report.item("parameters").findings[0].evidence["foreign_tensors"] == 2


@pytest.mark.parametrize("sigmoid", [True, False])
def test_training_steps_hand_the_monitor_the_loss_tensor_so_its_graph_is_read(sigmoid):
    """A sigmoid before BCEWithLogitsLoss shows only in the loss's graph: preflight used to
    hand the Monitor the loss's value, and its training steps passed. The fixed twin passes."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)]
    model = torch.nn.Sequential(*layers, *([torch.nn.Sigmoid()] if sigmoid else []))
    bce = torch.nn.BCEWithLogitsLoss()
    x = torch.randn(32, 16)
    y = (x[:, 0] > 0).long()
    report = preflight(model, lambda out, y: bce(out.squeeze(-1), y.float()), x, y)
    codes = _codes(report, "training steps")
    assert codes == (["PROBABILITIES_AS_LOGITS"] if sigmoid else []), str(report)
