"""The autograd engine: accumulation, graph shapes, grad modes, hooks, errors and dtypes."""
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import minigrad as mg
from minigrad import nn
from tests.minigrad.op_registry import OPS

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])


def _leaf(values=X, dtype=np.float64):
    return mg.tensor(np.asarray(values, dtype=dtype), requires_grad=True)


# ------------------------------------------------------------------- accumulation
def test_gradients_accumulate_across_backward_calls():
    x = _leaf()
    (x * 2.0).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad, 2.0 + 2 * X)


def test_long_chain_backward_is_iterative():
    x = _leaf(np.array([1.0]))
    y = x
    for _ in range(5000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(x.grad, [1.0001 ** 5000], rtol=1e-10)


def test_diamond_graph_matches_torch():
    def diamond(x):
        shared = x * x
        left, right = shared.exp(), shared * 3.0
        return (left * right + shared).sum()

    x, tx = _leaf(), torch.tensor(X, requires_grad=True)
    diamond(x).backward()
    diamond(tx).backward()
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-12)


def test_same_tensor_twice_in_one_op():
    x = _leaf()
    (x * x + x / x).sum().backward()
    np.testing.assert_allclose(x.grad, 2 * X)


# ----------------------------------------------------------------------- grad modes
def test_no_grad_context_records_nothing_and_restores_mode():
    x = _leaf()
    with mg.no_grad():
        y = x * 2.0
        with mg.enable_grad():
            z = x * 2.0
        assert not mg.is_grad_enabled()
    assert mg.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None


@pytest.mark.parametrize("make_decorator", [
    mg.no_grad, lambda: mg.no_grad, lambda: mg.set_grad_enabled(False)])
def test_grad_mode_decorators(make_decorator):
    @make_decorator()
    def double(x):
        assert not mg.is_grad_enabled()
        return x * 2.0

    assert mg.is_grad_enabled()
    assert not double(_leaf()).requires_grad
    assert mg.is_grad_enabled()


def test_enable_grad_decorator_inside_no_grad():
    @mg.enable_grad()
    def double(x):
        return x * 2.0

    with mg.no_grad():
        assert double(_leaf()).requires_grad


def test_set_grad_enabled_switches_at_once_and_as_block_restores():
    try:
        mg.set_grad_enabled(False)
        assert not mg.is_grad_enabled()
        with mg.set_grad_enabled(True):
            assert mg.is_grad_enabled()
        assert not mg.is_grad_enabled()
    finally:
        mg.set_grad_enabled(True)
    assert mg.is_grad_enabled()


def test_grad_mode_restored_when_block_raises():
    with pytest.raises(KeyError):
        with mg.no_grad():
            raise KeyError("boom")
    assert mg.is_grad_enabled()


# ------------------------------------------------------------ retain_grad and hooks
def test_retain_grad_keeps_intermediate_gradient():
    x = _leaf()
    y = x * 3.0
    y.retain_grad()
    z = x * 3.0
    (y * y + z).sum().backward()
    np.testing.assert_allclose(y.grad, 2 * 3.0 * X)
    assert z.grad is None


def test_hook_replaces_gradient_like_torch_and_handle_removes_it():
    def run(leaf):
        middle = leaf * 2.0
        handles = [middle.register_hook(lambda g: g * 10.0), leaf.register_hook(lambda g: g + 1.0)]
        (middle * middle).sum().backward()
        return handles

    x, tx = _leaf(), torch.tensor(X, requires_grad=True)
    run(x)
    run(tx)
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-12)

    seen = []
    y = _leaf()
    handle = y.register_hook(seen.append)
    (y * 2.0).sum().backward()
    handle.remove()
    handle.remove()
    (y * 2.0).sum().backward()
    assert len(seen) == 1
    np.testing.assert_allclose(y.grad, np.full(X.shape, 4.0))


def test_hook_returning_none_keeps_gradient():
    x = _leaf()
    x.register_hook(lambda g: None)
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad, np.full(X.shape, 2.0))


# --------------------------------------------------------- detach, requires_grad
def test_detach_shares_data_and_cuts_the_graph():
    x = _leaf()
    d = (x * 2.0).detach()
    assert not d.requires_grad and d.grad_fn is None
    y = x.detach()
    assert np.shares_memory(y.data, x.data)
    (x * 1.0 + d).sum().backward()
    np.testing.assert_allclose(x.grad, np.ones(X.shape))


def test_requires_grad_rules():
    x, c = _leaf(), mg.tensor(X)
    assert x.is_leaf and (x + c).requires_grad and not (c * 2.0).requires_grad
    assert not (x + c).is_leaf
    with pytest.raises(RuntimeError, match="floating"):
        mg.tensor(np.array([1, 2]), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        (x * 2.0).requires_grad_(False)
    with pytest.raises(RuntimeError, match="does not require grad"):
        (c * 2.0).sum().backward()


# ------------------------------------------------------------------------- errors
def test_backward_on_non_scalar_without_gradient_names_the_shape():
    with pytest.raises(RuntimeError, match=r"\(2, 3\)"):
        (_leaf() * 2.0).backward()


def test_backward_with_a_gradient_of_the_wrong_shape():
    with pytest.raises(mg.GradientShapeError, match=r"\(3,\).*\(2, 3\)"):
        (_leaf() * 2.0).backward(np.ones(3))


class _SumsAwayRows(mg.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2.0

    @staticmethod
    def backward(ctx, grad):
        return grad.sum(axis=0)


class _TooManyGradients(mg.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2.0

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


def test_custom_function_with_wrong_gradient_shape_names_op_and_shapes():
    with pytest.raises(mg.GradientShapeError, match=r"_SumsAwayRows.*\(3,\).*\(2, 3\)"):
        _SumsAwayRows.apply(_leaf()).sum().backward()


def test_custom_function_with_wrong_number_of_gradients():
    with pytest.raises(RuntimeError, match="_TooManyGradients.*2 gradients.*expected 1"):
        _TooManyGradients.apply(_leaf()).sum().backward()


def test_shape_mismatch_in_forward_names_op_and_shapes():
    with pytest.raises(mg.ShapeError, match=r"MatMul.*\(2, 3\), \(2, 3\)"):
        _leaf() @ _leaf()


def test_second_backward_through_freed_graph_raises_unless_retained():
    x = _leaf()
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()

    z = (x * x).sum()
    z.backward(retain_graph=True)
    z.backward()
    np.testing.assert_allclose(x.grad, 2 * X + 4 * X)


# ------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("spec", OPS, ids=lambda spec: spec.name)
@given(data=st.data())
def test_float32_stays_float32_through_every_op(spec, data):
    case = data.draw(spec.cases, label="case")
    inputs = [mg.tensor(a.astype(np.float32), requires_grad=True) for a in case.arrays]
    params = {key: _to_float32(value) for key, value in case.params.items()}
    out = spec.minigrad(*inputs, **params)
    assert out.dtype == np.float32, f"{spec.name}: forward gave {out.dtype}"
    out.backward(np.ones(out.shape, dtype=np.float32))
    for index, x in enumerate(inputs):
        assert x.grad.dtype == np.float32, f"{spec.name}: gradient of input {index}"


def _to_float32(value):
    floating = isinstance(value, np.ndarray) and value.dtype.kind == "f"
    return value.astype(np.float32) if floating else value


@pytest.mark.parametrize("expression", [
    lambda x: x + 1, lambda x: 1 + x, lambda x: x * 2.5, lambda x: 2.5 * x, lambda x: x - 0.5,
    lambda x: 3 - x, lambda x: x / 3, lambda x: 10.0 / x, lambda x: x ** 2, lambda x: 2.0 ** x,
    lambda x: x * np.float64(2.0), lambda x: x.clamp(min=0.1), lambda x: x.mean() + 1.0,
])
def test_python_scalars_do_not_upcast_float32(expression):
    x = _leaf(np.abs(X) + 0.5, dtype=np.float32)
    out = expression(x)
    assert out.dtype == np.float32
    out.sum().backward()
    assert x.grad.dtype == np.float32


# ------------------------------------------------------------------ module hooks
def _twin_models():
    model = nn.Sequential(nn.Linear(3, 4, dtype=np.float64), nn.Tanh(),
                          nn.Linear(4, 2, dtype=np.float64))
    twin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                               torch.nn.Linear(4, 2)).double()
    twin.load_state_dict({k: torch.from_numpy(v.data.copy())
                          for k, v in model.state_dict().items()})
    return model, twin


def _record_hooks(model, records):
    handles = []
    for name, module in model.named_modules():
        if not name:
            continue
        handles.append(module.register_forward_hook(
            lambda m, args, out, name=name: records.append(("forward", name, _np(out)))))
        handles.append(module.register_full_backward_hook(
            lambda m, grad_in, grad_out, name=name: records.append(
                ("backward", name, [_np(g) for g in grad_in], [_np(g) for g in grad_out]))))
    return handles


def _np(value):
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    return np.asarray(getattr(value, "data", value))


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_module_hooks_see_what_torch_hooks_see(input_requires_grad):
    model, twin = _twin_models()
    records, torch_records = [], []
    handles = _record_hooks(model, records) + _record_hooks(twin, torch_records)
    x = mg.tensor(X, requires_grad=input_requires_grad)
    tx = torch.tensor(X, requires_grad=input_requires_grad)
    model(x).sum().backward()
    twin(tx).sum().backward()
    assert [r[:2] for r in records] == [r[:2] for r in torch_records]
    for ours, theirs in zip(records, torch_records):
        for got, expected in zip(ours[2:], theirs[2:]):
            got = got if isinstance(got, list) else [got]
            expected = expected if isinstance(expected, list) else [expected]
            assert [g is None for g in got] == [e is None for e in expected], ours[:2]
            for g, e in zip(got, expected):
                if e is not None:
                    np.testing.assert_allclose(g, e, rtol=1e-12, err_msg=str(ours[:2]))
    for handle in handles:
        handle.remove()
    records.clear()
    model(x).sum().backward()
    assert records == []


def test_backward_hook_can_replace_grad_input_like_torch():
    model, twin = _twin_models()
    for net in (model, twin):
        net[1].register_full_backward_hook(lambda m, grad_in, grad_out: (grad_in[0] * 2.0,))
    model(mg.tensor(X)).sum().backward()
    twin(torch.tensor(X)).sum().backward()
    for (name, p), (_, tp) in zip(model.named_parameters(), twin.named_parameters()):
        np.testing.assert_allclose(p.grad, tp.grad.numpy(), rtol=1e-12, err_msg=name)


def _scaling_net(base):
    class Net(base.Module):
        def forward(self, x, *, scale=1.0):
            return x * scale
    return Net()


def test_forward_pre_hook_with_kwargs_sees_and_replaces_them_like_torch():
    seen = {}
    for name, base in (("minigrad", nn), ("torch", torch.nn)):
        net = _scaling_net(base)
        calls = []

        def hook(module, args, kwargs, calls=calls):
            calls.append((len(args), sorted(kwargs)))
            return args, {**kwargs, "scale": 3.0}
        plain = net.register_forward_pre_hook(lambda module, args, calls=calls: calls.append(
            ("plain", len(args))))
        handle = net.register_forward_pre_hook(hook, with_kwargs=True)
        tensor = mg.tensor if name == "minigrad" else torch.tensor
        out = net(tensor(np.ones(2)), scale=2.0)
        handle.remove()
        handle.remove()                                   # idempotent
        again = net(tensor(np.ones(2)), scale=2.0)
        plain.remove()
        seen[name] = (calls, _np(out).tolist(), _np(again).tolist())
        if name == "minigrad":
            assert net._forward_pre_hooks == {} and net._forward_pre_hooks_with_kwargs == {}
    assert seen["minigrad"] == seen["torch"]
    assert seen["torch"] == ([("plain", 1), (1, ["scale"]), ("plain", 1)], [3.0, 3.0],
                             [2.0, 2.0])
