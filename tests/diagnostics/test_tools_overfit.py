"""overfit_one_batch: healthy nets memorise a batch, planted bugs fail with causes, state kept."""
import json

import numpy as np
import pytest
import torch

from diagnostics import overfit_one_batch
from diagnostics.errors import DiagnosticsError

from .tools_helpers import (FRAMEWORKS, NN, OPTIM, assert_same, capture, classification_data,
                            cross_entropy, mlp, take_steps)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_healthy_net_memorises_a_batch_and_stops_early(framework):
    x, y = classification_data(rows=16)
    result = overfit_one_batch(mlp(framework, (8, 32, 3)), cross_entropy(framework), x, y)
    assert result.passed and result.findings == []
    assert 0 < result.steps < 200 and len(result.losses) == result.steps + 1
    expected_target = 0.05 * min(result.initial_loss, np.log(3))  # -log(1/C) for C = 3
    assert result.final_loss <= result.target_loss == pytest.approx(expected_target, rel=1e-6)
    assert result.accuracies[-1] == 1.0
    assert "PASSED in" in str(result)
    assert json.loads(json.dumps(result.to_dict()))["passed"] is True


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_run_still_falling_at_the_last_step_gets_more_rounds(framework):
    x, y = classification_data(rows=16)
    short = overfit_one_batch(mlp(framework, (8, 32, 3)), cross_entropy(framework), x, y,
                              steps=40, patience=0)
    assert not short.passed and short.max_steps == 40       # 40 steps are not enough...
    longer = overfit_one_batch(mlp(framework, (8, 32, 3)), cross_entropy(framework), x, y,
                               steps=40)
    assert longer.passed and 40 < longer.steps <= 160       # ...but it was getting there
    assert longer.max_steps in (80, 120, 160)
    assert longer.losses[:41] == short.losses[:41]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_broadcasting_target_shape_fails_and_is_named_as_the_cause(framework):
    x, _ = classification_data(rows=16)
    y = np.random.default_rng(1).standard_normal(16).astype(np.float32)  # (16,) vs output (16, 1)
    with pytest.warns(UserWarning, match="broadcast"):  # both frameworks warn, as torch does
        result = overfit_one_batch(mlp(framework, (8, 32, 1)), NN[framework].MSELoss(), x, y,
                                   steps=60)
    assert not result.passed and result.steps is None
    (finding,) = result.findings
    assert finding.code == "OVERFIT_FAILED" and finding.severity == "error"
    assert "output shape (16, 1) and target shape (16,) differ" in finding.message
    assert "FAILED after 60 steps" in str(result)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_dead_network_fails_with_no_gradient_as_the_cause(framework):
    x, y = classification_data(rows=16)
    model = mlp(framework, (8, 16, 3))
    _set_bias(model[0].bias, -50.0)  # every hidden ReLU is off for every input
    result = overfit_one_batch(model, cross_entropy(framework), x, y, steps=30)
    assert not result.passed
    causes = result.findings[0].evidence["likely_causes"]
    assert any("no gradient reaches 0.weight, 0.bias" in cause for cause in causes)
    assert result.max_steps == 30    # no extra rounds for a run that cannot learn


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_model_optimizer_and_rng_are_restored_bit_for_bit(framework):
    x, y = classification_data(rows=16)
    model = mlp(framework, (8, 16, 3))
    optimizer = OPTIM[framework].Adam(model.parameters(), lr=1e-2)
    take_steps(framework, model, optimizer, x, y)
    model.eval()
    before = capture(model, optimizer)
    result = overfit_one_batch(model, cross_entropy(framework), x, y, optimizer=optimizer,
                               steps=20)
    assert len(result.losses) > 2  # it did train
    assert_same(before, capture(model, optimizer))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_state_is_restored_when_the_loss_function_fails_midway(framework):
    x, y = classification_data(rows=16)
    model = mlp(framework, (8, 16, 3))
    optimizer = OPTIM[framework].SGD(model.parameters(), lr=0.1, momentum=0.9)
    take_steps(framework, model, optimizer, x, y)
    before = capture(model, optimizer)
    calls = []

    def flaky_loss(output, target):
        calls.append(bool(output.requires_grad))   # training steps (not the probes of the loss)
        if sum(calls) == 3:
            raise RuntimeError("boom")
        return cross_entropy(framework)(output, target)

    with pytest.raises(RuntimeError, match="boom"):
        overfit_one_batch(model, flaky_loss, x, y, optimizer=optimizer)
    assert_same(before, capture(model, optimizer))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_bad_arguments_raise_naming_the_argument(framework):
    x, y = classification_data(rows=4)
    model, loss = mlp(framework), cross_entropy(framework)
    other = OPTIM[framework].SGD(mlp(framework).parameters(), lr=0.1)
    cases = [
        ((object(), loss, x, y), {}, "model: expected a torch.nn.Module or a minigrad"),
        ((model, "mse", x, y), {}, "loss_fn: expected a callable"),
        ((model, loss, x.tolist(), y), {}, "inputs: expected a"),
        ((model, loss, x, None), {}, "targets: expected a"),
        ((model, loss, x, y), {"steps": 0}, "steps: expected an integer >= 1"),
        ((model, loss, x, y), {"target_loss": -1.0}, "target_loss: expected a finite number"),
        ((model, loss, x, y), {"optimizer": other}, "optimizer: expected an optimizer over this"),
        ((model, loss, x, y), {"optimizer": "adam"}, "optimizer: expected a torch.optim"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(DiagnosticsError, match=message):
            overfit_one_batch(*args, **kwargs)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_loss_that_is_not_a_scalar_is_a_clear_error(framework):
    x, y = classification_data(rows=4)
    per_example = NN[framework].CrossEntropyLoss(reduction="none")
    with pytest.raises(DiagnosticsError, match=r"loss_fn: expected a function returning a one-el"):
        overfit_one_batch(mlp(framework), per_example, x, y)


def test_blown_up_initial_loss_does_not_make_the_default_target_easy():
    x, y = classification_data(rows=16)
    model = mlp("minigrad", (8, 32, 3))
    model[2].weight.data[...] *= 100.0  # a loss far above -log(1/3)
    result = overfit_one_batch(model, cross_entropy("minigrad"), x, y, steps=3)
    assert result.initial_loss > 10 and result.target_loss == pytest.approx(0.05 * np.log(3))


def test_target_already_met_passes_at_step_zero():
    x, y = classification_data(rows=4)
    result = overfit_one_batch(mlp("minigrad"), cross_entropy("minigrad"), x, y, target_loss=50.0)
    assert result.passed and result.steps == 0 and len(result.losses) == 1


def _set_bias(bias, value):
    if isinstance(bias, torch.Tensor):
        with torch.no_grad():
            bias.fill_(value)
    else:
        bias.data[...] = value


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_loss_still_falling_with_the_batch_memorised_passes_short_of_the_target(framework):
    x, y = classification_data(rows=16)
    result = overfit_one_batch(mlp(framework, (8, 32, 3)), cross_entropy(framework), x, y,
                               target_loss=1e-6, steps=120)
    assert result.passed and result.steps is None and result.still_falling
    assert result.final_loss > 1e-6 and result.accuracies[-1] == 1.0
    assert result.findings == [] and "still falling" in str(result)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_loss_stuck_on_a_floor_fails_however_far_it_fell(framework):
    x, y = classification_data(rows=16)
    y = np.repeat(y[:8], 2)                     # the same input ...
    x = np.repeat(x[:8], 2, axis=0)
    y[1::2] = (y[::2] + 1) % 3                  # ... with two different labels: a floor of ln 2
    result = overfit_one_batch(mlp(framework, (8, 32, 3)), cross_entropy(framework), x, y,
                               target_loss=1e-3, steps=200)
    assert not result.passed and not result.still_falling
    assert result.findings[0].code == "OVERFIT_FAILED"


def test_a_learnable_loss_temperature_in_the_optimizer_is_welcome_and_put_back():
    """A tensor the optimizer trains beside all of the model's parameters (CLIP's logit scale)
    is the user's design: overfit_one_batch and find_lr train it and restore it after."""
    torch = pytest.importorskip("torch")
    from diagnostics import find_lr

    x, y = classification_data(rows=16)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    model = mlp("torch")
    temperature = torch.nn.Parameter(torch.tensor(2.0))
    optimizer = torch.optim.Adam([*model.parameters(), temperature], lr=1e-2)

    def loss_fn(out, targets):
        return torch.nn.functional.cross_entropy(out * temperature, targets)

    overfit_one_batch(model, loss_fn, x, y, optimizer=optimizer, steps=20)
    assert temperature.item() == 2.0 and temperature.grad is None
    find_lr(model, loss_fn, (x, y), optimizer=optimizer, steps=10, progress=False)
    assert temperature.item() == 2.0 and temperature.grad is None


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_softmax_before_cross_entropy_is_named_first_with_its_floor(framework):
    """The loss falls, slowly, and stops above ln(e + C - 1) - 1: not "too slow, more steps"
    but the softmax applied twice, read from the loss's graph."""
    import minigrad.functional as mF

    softmax = (lambda out: torch.softmax(out, dim=1)) if framework == "torch" else (
        lambda out: mF.softmax(out, 1))
    ce = cross_entropy(framework)
    x, y = classification_data(rows=16)
    result = overfit_one_batch(mlp(framework, (8, 32, 3)), lambda out, t: ce(softmax(out), t),
                               x, y, steps=60, patience=0)
    assert not result.passed
    causes = result.findings[0].evidence["likely_causes"]
    assert causes[0].startswith("the softmax is applied twice (the loss's graph: ")
    assert f"{np.log(np.e + 2) - 1:.4g} for C = 3" in causes[0]
    assert not any(cause.startswith("the loss fell") for cause in causes)
    healthy = overfit_one_batch(mlp(framework, (8, 32, 3)), ce, x, y, steps=60, patience=0)
    assert all("applied twice" not in c for f in healthy.findings
               for c in f.evidence.get("likely_causes", []))


def test_a_sigmoid_before_bce_with_logits_is_named_first():
    x, _ = classification_data(rows=16)
    y = (x[:, :1] > 0).astype(np.float32)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1),
                                torch.nn.Sigmoid())
    result = overfit_one_batch(model, torch.nn.BCEWithLogitsLoss(), x, y, steps=60, patience=0)
    assert not result.passed
    cause = result.findings[0].evidence["likely_causes"][0]
    assert cause.startswith("the sigmoid is applied twice") and "0.3133" in cause
