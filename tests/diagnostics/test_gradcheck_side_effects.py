"""Nothing lost: a gradient check leaves the user's model exactly as it found it, also on error."""
import random

import numpy as np
import pytest
import torch

import minigrad
from diagnostics import DiagnosticsError, check_gradients
from diagnostics.backends import get_backend

from .gradcheck_models import FRAMEWORKS, build, one_torch_thread


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


def _model_with_state(framework):
    """A float32 model with batch norm and dropout, a backward already run, eval mode in one
    layer, and a user hook that counts its calls."""
    nn = torch.nn if framework == "torch" else minigrad.nn
    (torch.manual_seed if framework == "torch" else minigrad.manual_seed)(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(6, 3))
    model[3].eval()
    calls = []
    model[0].register_forward_hook(lambda module, args, output: calls.append(1))
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    backend = get_backend(model)
    (model(backend.from_numpy(x)) ** 2).sum().backward()
    return model, calls, x


def _state(model):
    backend = get_backend(model)
    return {
        "parameters": {n: (backend.to_numpy(p), backend.to_numpy(p).dtype, p.requires_grad)
                       for n, p in backend.named_parameters()},
        "grads": {n: backend.read_gradient(n) for n, _ in backend.named_parameters()},
        "buffers": {n: backend.to_numpy(b) for n, b in backend.named_buffers()},
        "training": {n: m.training for n, m in backend.named_modules()},
        "hooks": {n: len(m._forward_hooks) for n, m in backend.named_modules()},
        "numpy": np.random.get_state()[1].copy(), "python": random.getstate(),
        "torch": torch.get_rng_state().clone(),
        "minigrad": minigrad.get_rng_state(),
    }


def _assert_same(before, after):
    for name, (values, dtype, requires_grad) in before["parameters"].items():
        now = after["parameters"][name]
        assert now[1] == dtype and now[2] == requires_grad
        np.testing.assert_array_equal(now[0], values)
    for name, grad in before["grads"].items():
        np.testing.assert_array_equal(after["grads"][name], grad)
    for name, values in before["buffers"].items():
        np.testing.assert_array_equal(after["buffers"][name], values)
    for key in ("training", "hooks", "python", "minigrad"):
        assert after[key] == before[key], key
    np.testing.assert_array_equal(after["numpy"], before["numpy"])
    assert torch.equal(after["torch"], before["torch"])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_model_grads_modes_hooks_and_rng_untouched(framework):
    model, calls, x = _model_with_state(framework)
    before, count = _state(model), len(calls)
    loss = torch.nn.CrossEntropyLoss() if framework == "torch" else minigrad.nn.CrossEntropyLoss()
    report = check_gradients(model, loss, x, np.array([0, 1, 2, 0, 1]))
    assert report.passed, str(report)
    _assert_same(before, _state(model))
    assert len(calls) == count   # the check ran a copy, without the user's hooks


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("fail_at", [1, 9])
def test_untouched_when_the_loss_raises(framework, fail_at):
    model, calls, x = _model_with_state(framework)
    before = _state(model)
    inner = torch.nn.functional.mse_loss if framework == "torch" else minigrad.functional.mse_loss
    seen = []

    def flaky_loss(output, targets):
        seen.append(1)
        if len(seen) == fail_at:
            raise RuntimeError("loss exploded")
        return inner(output, targets)

    with pytest.raises((DiagnosticsError, RuntimeError), match="loss exploded"):
        check_gradients(model, flaky_loss, x, np.zeros((5, 3), dtype=np.float32))
    _assert_same(before, _state(model))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_integer_class_targets_stay_integer(framework):
    model, loss_fn, inputs, targets = build(framework, "mlp")
    seen = []

    def loss(output, labels):
        seen.append(get_backend(model).to_numpy(labels).dtype)
        return loss_fn(output, labels)

    check_gradients(model, loss, inputs, targets.astype(np.int64))
    assert seen and all(dtype == np.int64 for dtype in seen)


def test_framework_tensors_are_accepted_and_left_alone():
    model, loss_fn, inputs, targets = build("torch", "mlp")
    x, y = torch.tensor(inputs), torch.tensor(targets)
    x_before, y_before = x.clone(), y.clone()
    assert check_gradients(model, loss_fn, x, y).passed
    assert torch.equal(x, x_before) and torch.equal(y, y_before) and x.dtype == torch.float32
