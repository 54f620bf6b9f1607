"""Every op of the registry: forward and gradients against torch in float64, and gradients
against central finite differences of minigrad itself."""
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import minigrad as mg
import minigrad.functional as F
import torch.nn.functional as TF
from tests.minigrad.op_registry import OPS

FINITE_DIFFERENCE_STEP = 1e-6


def _run_minigrad(spec, case):
    inputs = [mg.tensor(a, requires_grad=True) for a in case.arrays]
    return inputs, spec.minigrad(*inputs, **case.params)


def _run_torch(spec, case):
    inputs = [torch.tensor(a, requires_grad=True) for a in case.arrays]
    return inputs, spec.torch(*inputs, **case.params)


def _upstream(shape):
    """A fixed, generic gradient of the output, so every output element is weighed differently."""
    return np.random.default_rng(0).uniform(0.5, 1.5, size=shape)


def _torch_grad(tensor):
    return np.zeros(tuple(tensor.shape)) if tensor.grad is None else tensor.grad.numpy()


@pytest.mark.parametrize("spec", OPS, ids=lambda spec: spec.name)
@given(data=st.data())
def test_forward_matches_torch(spec, data):
    case = data.draw(spec.cases, label="case")
    _, out = _run_minigrad(spec, case)
    _, expected = _run_torch(spec, case)
    assert out.shape == tuple(expected.shape), f"{spec.name}: forward shape"
    assert out.dtype == np.float64, f"{spec.name}: forward dtype"
    np.testing.assert_allclose(out.data, expected.detach().numpy(), rtol=1e-10, atol=1e-12,
                               err_msg=f"{spec.name}: forward")


@pytest.mark.parametrize("spec", OPS, ids=lambda spec: spec.name)
@given(data=st.data())
def test_gradients_match_torch(spec, data):
    case = data.draw(spec.cases, label="case")
    inputs, out = _run_minigrad(spec, case)
    torch_inputs, torch_out = _run_torch(spec, case)
    upstream = _upstream(out.shape)
    out.backward(upstream)
    torch_out.backward(torch.from_numpy(upstream))
    for index, (x, tx) in enumerate(zip(inputs, torch_inputs)):
        assert x.grad is not None, f"{spec.name}: backward input {index} got no gradient"
        np.testing.assert_allclose(x.grad, _torch_grad(tx), rtol=1e-9, atol=1e-12,
                                   err_msg=f"{spec.name}: backward input {index}")


@pytest.mark.parametrize("spec", OPS, ids=lambda spec: spec.name)
@given(data=st.data())
def test_gradients_match_finite_differences(spec, data):
    case = data.draw(spec.cases, label="case")
    inputs, out = _run_minigrad(spec, case)
    upstream = _upstream(out.shape)
    out.backward(upstream)
    for index, x in enumerate(inputs):
        numeric = _finite_difference_grad(spec, case, index, upstream)
        np.testing.assert_allclose(x.grad, numeric, rtol=1e-5, atol=1e-7,
                                   err_msg=f"{spec.name}: input {index}, analytic vs numeric")


_AT_KINKS = np.array([[1.0, 1.0, 0.0, -1.0], [2.0, 0.0, 2.0, 2.0]])
KINKS = {
    "relu": (F.relu, TF.relu),
    "leaky_relu": (F.leaky_relu, TF.leaky_relu),
    "abs": (lambda x: x.abs(), torch.abs),
    "clamp": (lambda x: x.clamp(0.0, 1.0), lambda x: x.clamp(0.0, 1.0)),
    "amax": (lambda x: x.amax(1), lambda x: x.amax(1)),
    "amin": (lambda x: x.amin(0), lambda x: x.amin(0)),
    "max_all": (lambda x: x.max(), lambda x: x.max()),
    "max_dim": (lambda x: x.max(1).values, lambda x: x.max(1).values),
    "min_dim": (lambda x: x.min(1, keepdim=True).values,
                lambda x: x.min(1, keepdim=True).values),
    "pow_tensor": (lambda x: x ** x, lambda x: x ** x),
}


@pytest.mark.parametrize("name", KINKS)
def test_gradients_at_kinks_and_ties_match_torch(name):
    """At 0, at clamp bounds and at tied maxima minigrad picks the same subgradient as torch."""
    minigrad_fn, torch_fn = KINKS[name]
    x = mg.tensor(_AT_KINKS, requires_grad=True)
    tx = torch.tensor(_AT_KINKS, requires_grad=True)
    out, torch_out = minigrad_fn(x), torch_fn(tx)
    out.backward(np.ones(out.shape))
    torch_out.backward(torch.ones_like(torch_out))
    np.testing.assert_allclose(out.data, torch_out.detach().numpy())
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), err_msg=f"{name}: backward")


def _finite_difference_grad(spec, case, index, upstream):
    """Central differences of ``sum(op(...) * upstream)`` with respect to input ``index``."""
    arrays = [a.copy() for a in case.arrays]
    target = arrays[index]
    grad = np.zeros_like(target)
    with mg.no_grad():
        for position in np.ndindex(target.shape):
            original = target[position]
            values = []
            for shifted in (original + FINITE_DIFFERENCE_STEP, original - FINITE_DIFFERENCE_STEP):
                target[position] = shifted
                out = spec.minigrad(*(mg.tensor(a) for a in arrays), **case.params)
                values.append(float(np.sum(out.data * upstream)))
            target[position] = original
            grad[position] = (values[0] - values[1]) / (2 * FINITE_DIFFERENCE_STEP)
    return grad
