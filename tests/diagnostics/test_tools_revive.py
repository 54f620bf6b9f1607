"""revive_dead_units: dead units found per unit, revived without changing the output, and the
net trains again; healthy nets and the RNG are left alone; optimizer moments reset."""
import json

import numpy as np
import pytest
import torch

import minigrad
from diagnostics import revive_dead_units
from diagnostics.errors import DiagnosticsError

from .tools_helpers import (FRAMEWORKS, NN, OPTIM, assert_same, capture, classification_data,
                            cross_entropy, mlp, take_steps, tensor)

DEAD = {"0": 52, "2": 50}  # layer -> how many of its 64 units get a killing bias


def _mostly_dead(framework):
    """8 -> 64 -> 64 -> 3 with 102 of 128 hidden units (80%) off for every input."""
    model = mlp(framework, (8, 64, 64, 3))
    for layer, count in DEAD.items():
        _write(model[int(layer)].bias, slice(0, count), -20.0)
    return model


def _output(framework, model, x):
    output = model(tensor(framework, x))
    return output.detach().numpy() if framework == "torch" else output.data.copy()


def _loss_after_training(framework, model, x, y, steps=40):
    optimizer = OPTIM[framework].Adam(model.parameters(), lr=1e-2)
    take_steps(framework, model, optimizer, x, y, steps=steps)
    return float(cross_entropy(framework)(model(tensor(framework, x)), tensor(framework, y)).item())


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_mostly_dead_net_is_revived_output_unchanged_and_trains_again(framework):
    x, y = classification_data(rows=128)
    model = _mostly_dead(framework)
    before = _output(framework, model, x)
    report = revive_dead_units(model, x)
    assert report.changed and report.dead_fraction_before > 0.7
    assert report.dead_fraction_after < 0.1
    assert {layer.name: len(layer.revived) for layer in report.layers} == {"1": 52, "3": 50}
    assert [(layer.incoming, layer.outgoing) for layer in report.layers] == [("0", "2"), ("2", "4")]
    np.testing.assert_array_equal(_output(framework, model, x), before)
    assert report.output_change == 0.0
    assert [f.code for f in report.findings] == ["DEAD_UNITS", "DEAD_UNITS"]
    assert "revived 102 of 128 units (the model was changed)" in str(report)
    assert json.loads(json.dumps(report.to_dict()))["revived"] == 102

    revived_loss = _loss_after_training(framework, model, x, y)
    dead_loss = _loss_after_training(framework, _mostly_dead(framework), x, y)
    assert revived_loss < 0.6 * dead_loss


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_healthy_net_is_left_exactly_as_it_was(framework):
    x, y = classification_data(rows=64)
    model = mlp(framework, (8, 32, 3))
    optimizer = OPTIM[framework].Adam(model.parameters(), lr=1e-3)
    take_steps(framework, model, optimizer, x, y)
    before = capture(model, optimizer)
    report = revive_dead_units(model, x, optimizer=optimizer)
    assert not report.changed and report.findings == []
    assert "no dead units among 32 (model unchanged)" in str(report)
    assert_same(before, capture(model, optimizer))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_only_the_revived_entries_change_and_their_moments_are_reset(framework):
    x, y = classification_data(rows=64)
    model = _mostly_dead(framework)
    optimizer = OPTIM[framework].Adam(model.parameters(), lr=1e-3)
    take_steps(framework, model, optimizer, x, y)
    before = capture(model, optimizer)
    report = revive_dead_units(model, [(x[:32], y[:32]), (x[32:], y[32:])], optimizer=optimizer)
    after = capture(model, optimizer)
    assert after["rng"].keys() == before["rng"].keys()
    assert_same(before["rng"], after["rng"])  # fresh weights come from a private generator
    units = report.layers[0].revived
    w_in, w_out = (after["params"][n][0] for n in ("0.weight", "2.weight"))
    # the outgoing columns are zero, except in rows that layer 2's own revival re-drew
    rows = np.setdiff1d(np.arange(64), report.layers[1].revived)
    assert np.all(w_out[np.ix_(rows, units)] == 0)
    assert np.all(after["params"]["0.bias"][0][units] == 0)
    kept = np.setdiff1d(np.arange(64), units)
    np.testing.assert_array_equal(w_in[kept], before["params"]["0.weight"][0][kept])
    assert not np.array_equal(w_in[units], before["params"]["0.weight"][0][units])
    moments = _moments(optimizer, model[0].weight)
    assert np.all(moments[units] == 0)
    np.testing.assert_array_equal(moments[kept], _saved_moment(before, 0)[kept])
    assert np.all(_moments(optimizer, model[2].weight)[:, units] == 0)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_conv_units_are_revived_per_channel(framework):
    nn = NN[framework]
    (torch.manual_seed if framework == "torch" else minigrad.manual_seed)(0)
    model = nn.Sequential(nn.Conv2d(2, 6, 3, padding=1), nn.ReLU(), nn.Conv2d(6, 4, 3))
    _write(model[0].bias, slice(0, 5), -50.0)
    x = np.random.default_rng(0).standard_normal((4, 2, 6, 6)).astype(np.float32)
    before = _output(framework, model, x)
    report = revive_dead_units(model, x)
    assert report.layers[0].revived == [0, 1, 2, 3, 4] and report.dead_fraction_after < 0.1
    np.testing.assert_array_equal(_output(framework, model, x), before)


def test_threshold_above_zero_also_revives_dormant_units():
    x, _ = classification_data(rows=128)
    model = mlp("minigrad", (8, 16, 3))
    model[0].bias.data[:4] = -2.5  # rarely on: dormant, not dead
    dead_only = revive_dead_units(mlp("minigrad", (8, 16, 3)), x)
    dormant = revive_dead_units(model, x, threshold=0.1)
    assert not dead_only.changed
    assert set(range(4)) <= set(dormant.layers[0].revived)


def test_layers_that_cannot_be_paired_are_listed_as_skipped():
    nn = minigrad.nn
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 4), nn.Tanh())
    report = revive_dead_units(model, classification_data(rows=8)[0])
    assert [layer.name for layer in report.layers] == ["1"]
    assert report.skipped == {"3": "no Linear or Conv2d directly after it"}
    assert "3            skipped: no Linear or Conv2d directly after it" in str(report)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_bad_arguments_raise_naming_the_argument(framework):
    x, y = classification_data(rows=8)
    model = mlp(framework)
    other = OPTIM[framework].SGD(mlp(framework).parameters(), lr=0.1)
    before = capture(model)
    cases = [
        ((model, "x"), {}, "inputs: expected a tensor, an array or an iterable of batches"),
        ((model, []), {}, "inputs: expected at least one batch"),
        ((model, [x.tolist()]), {}, r"inputs\[0\]: expected a"),
        ((model, x), {"threshold": -0.5}, "threshold: expected a finite number >= 0"),
        ((model, x), {"optimizer": other}, "optimizer: expected an optimizer over this"),
        ((object(), x), {}, "model: expected a torch.nn.Module or a minigrad"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(DiagnosticsError, match=message):
            revive_dead_units(*args, **kwargs)
    assert_same(before, capture(model))


def _write(param, index, value):
    if isinstance(param, torch.Tensor):
        with torch.no_grad():
            param[index] = value
    else:
        param.data[index] = value


def _moments(optimizer, param):
    value = optimizer.state[param]["exp_avg"]
    return value.numpy() if isinstance(value, torch.Tensor) else value


def _saved_moment(captured, index):
    return np.asarray(captured["optimizer"]["state"][index]["exp_avg"])
