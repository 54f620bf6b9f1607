"""The backend protocol on both frameworks: structure, array I/O, snapshot/restore, clone."""
import numpy as np
import pytest

from diagnostics.backends import MinigradBackend, TorchBackend, get_backend
from diagnostics.errors import DiagnosticsError
from tests.support.backend_models import MODELS


@pytest.fixture(params=sorted(MODELS))
def backend(request):
    return get_backend(MODELS[request.param]())


def _train_once(backend):
    x = backend.from_numpy(np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32))
    loss = (backend.forward(x) ** 2).sum()
    backend.backward(loss)


def test_backend_is_chosen_from_the_model_type():
    assert isinstance(get_backend(MODELS["torch"]()), TorchBackend)
    assert isinstance(get_backend(MODELS["minigrad"]()), MinigradBackend)
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
    backend.module("2").register_full_backward_hook(lambda *args: None)
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
