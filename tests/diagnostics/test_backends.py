"""The backend protocol on both frameworks: structure, array I/O, snapshot/restore, clone."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import minigrad
from diagnostics.backends import MinigradBackend, TorchBackend, get_backend
from diagnostics.errors import DiagnosticsError


def _torch_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


def _minigrad_model():
    minigrad.manual_seed(0)
    return minigrad.nn.Sequential(minigrad.nn.Linear(3, 4), minigrad.nn.ReLU(),
                                  minigrad.nn.Linear(4, 2))


MODELS = {"torch": _torch_model, "minigrad": _minigrad_model}


@pytest.fixture(params=sorted(MODELS))
def backend(request):
    return get_backend(MODELS[request.param]())


def _train_once(backend):
    x = backend.from_numpy(np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32))
    loss = (backend.forward(x) ** 2).sum()
    backend.backward(loss)


def test_backend_is_chosen_from_the_model_type():
    assert isinstance(get_backend(_torch_model()), TorchBackend)
    assert isinstance(get_backend(_minigrad_model()), MinigradBackend)
    with pytest.raises(DiagnosticsError, match="model: expected a torch.nn.Module or a minigrad"):
        get_backend([1, 2, 3])


def test_names_match_between_frameworks():
    names = {k: [n for n, _ in get_backend(f()).named_parameters()] for k, f in MODELS.items()}
    assert names["torch"] == names["minigrad"] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    modules = {k: [n for n, _ in get_backend(f()).named_modules()] for k, f in MODELS.items()}
    assert modules["torch"] == modules["minigrad"] == ["", "0", "1", "2"]


def test_write_then_read_parameter_round_trips(backend):
    values = np.arange(12, dtype=np.float32).reshape(4, 3)
    backend.write_parameter("0.weight", values)
    np.testing.assert_array_equal(backend.read_parameter("0.weight"), values)
    assert backend.read_parameter("0.weight").dtype == np.float32


def test_restore_puts_back_values_grads_modes_hooks_and_rng(backend):
    _train_once(backend)
    state = backend.snapshot()
    before = {n: backend.read_parameter(n) for n, _ in backend.named_parameters()}
    grads = {n: backend.read_gradient(n) for n, _ in backend.named_parameters()}
    numpy_draw = np.random.get_state()[1].copy()

    backend.write_parameter("2.bias", np.full(2, 7.0, dtype=np.float32))
    _train_once(backend)
    backend.model.eval()
    backend.add_forward_hook(backend.module("0"), lambda *args: None)
    backend.add_backward_hook(backend.module("2"), lambda *args: None)
    np.random.standard_normal(3)
    backend.restore(state)

    for name, _ in backend.named_parameters():
        np.testing.assert_array_equal(backend.read_parameter(name), before[name])
        np.testing.assert_array_equal(backend.read_gradient(name), grads[name])
    assert all(module.training for _, module in backend.named_modules())
    assert all(len(module.__dict__[attr]) == 0 for _, module in backend.named_modules()
               for attr in ("_forward_hooks", "_backward_hooks"))
    np.testing.assert_array_equal(np.random.get_state()[1], numpy_draw)


def test_preserved_restores_also_when_the_block_raises(backend):
    before = backend.read_parameter("0.weight")
    with pytest.raises(RuntimeError, match="boom"):
        with backend.preserved():
            backend.write_parameter("0.weight", np.zeros((4, 3), dtype=np.float32))
            raise RuntimeError("boom")
    np.testing.assert_array_equal(backend.read_parameter("0.weight"), before)


def test_clone_is_independent_float64_and_carries_no_hooks(backend):
    calls = []
    backend.add_forward_hook(backend.module("0"), lambda *args: calls.append(1))
    twin = backend.clone(dtype=np.float64)
    assert twin.read_parameter("0.weight").dtype == np.float64
    assert backend.read_parameter("0.weight").dtype == np.float32
    np.testing.assert_allclose(twin.read_parameter("0.weight"), backend.read_parameter("0.weight"))
    twin.write_parameter("0.weight", np.zeros((4, 3)))
    assert np.any(backend.read_parameter("0.weight") != 0)
    twin.forward(twin.from_numpy(np.ones((2, 3))))
    assert calls == []
    backend.forward(backend.from_numpy(np.ones((2, 3), dtype=np.float32)))
    assert calls == [1]


@pytest.mark.parametrize("scale", [0.0, 1.0, 300.0])
def test_prediction_entropy_is_the_mean_softmax_entropy(backend, scale):
    logits = (scale * np.random.default_rng(2).standard_normal((6, 5))).astype(np.float32)
    p = torch.softmax(torch.tensor(logits, dtype=torch.float64), dim=-1)
    expected = float(-(p * torch.log(p.clamp_min(1e-300))).sum(-1).mean())
    result = backend.gather([backend.prediction_entropy(backend.from_numpy(logits))])[0]
    assert result == pytest.approx(expected, rel=1e-5, abs=1e-6)
    if scale == 0.0:
        assert result == pytest.approx(np.log(5))


def test_prediction_entropy_needs_floating_scores_of_two_columns(backend):
    assert backend.prediction_entropy(backend.from_numpy(np.ones((4, 1), np.float32))) is None
    assert backend.prediction_entropy(backend.from_numpy(np.zeros((0, 3), np.float32))) is None
    assert backend.prediction_entropy(backend.from_numpy(np.ones((4, 3), np.int64))) is None


@given(shape=st.lists(st.integers(1, 6), min_size=0, max_size=4), per_unit=st.booleans(),
       seed=st.integers(0, 2**16))
@settings(max_examples=40)
def test_activation_and_gradient_statistics_match_numpy(shape, per_unit, seed):
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    values[values < -0.5] = 0.0                       # some exact zeros to count
    for name in sorted(MODELS):
        backend = get_backend(MODELS[name]())
        tensor = backend.from_numpy(values)
        squares, abs_total, largest = backend.gather(
            list(backend.gradient_statistics(tensor, per_unit=per_unit)))
        flat = values.astype(np.float64).reshape(-1)
        assert squares == pytest.approx(flat @ flat, rel=1e-5)
        assert abs_total == pytest.approx(np.abs(flat).sum(), rel=1e-5)
        if per_unit and values.ndim >= 1:
            expected = np.abs(values).reshape(shape[0], -1).max(axis=1)
            np.testing.assert_allclose(largest, expected, rtol=1e-6)
        else:
            assert largest == pytest.approx(np.abs(flat).max())
        if values.ndim >= 1:
            stats = backend.gather(list(backend.activation_statistics(tensor)))
            assert stats[2] == np.count_nonzero(values), name     # nonzero count
