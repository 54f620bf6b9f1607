"""SGD and Adam against torch's on random parameters, gradients and hyperparameters, in float64."""
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import minigrad
from tests.strategies import generators, shapes

TOL = 1e-10

sgd_options = st.fixed_dictionaries({
    "lr": st.floats(1e-3, 1.0),
    "momentum": st.sampled_from([0.0, 0.5, 0.9]) | st.floats(0.0, 0.99),
    "dampening": st.sampled_from([0.0, 0.3]),
    "weight_decay": st.sampled_from([0.0, 1e-2]) | st.floats(0.0, 0.5),
    "nesterov": st.booleans(),
}).filter(lambda o: not o["nesterov"] or (o["momentum"] > 0 and o["dampening"] == 0))

adam_options = st.fixed_dictionaries({
    "lr": st.floats(1e-4, 0.5),
    "betas": st.tuples(st.floats(0.0, 0.99), st.floats(0.5, 0.9999)),
    "eps": st.sampled_from([1e-8, 1e-3]),
    "weight_decay": st.sampled_from([0.0, 1e-2]) | st.floats(0.0, 0.5),
    "amsgrad": st.booleans(),
})


def make_pair(param_shapes, rng, minigrad_class, torch_class, options):
    """The same parameters, each in both frameworks, with the two optimizers over them."""
    values = [rng.standard_normal(shape) for shape in param_shapes]
    params = [minigrad.nn.Parameter(v.copy()) for v in values]
    twins = [torch.nn.Parameter(torch.from_numpy(v.copy())) for v in values]
    return params, twins, minigrad_class(params, **options), torch_class(twins, **options)


def run_steps(params, twins, optimizer, twin_optimizer, rng, steps):
    """``steps`` updates with random gradients; some parameters skip a step (grad None)."""
    for _ in range(steps):
        for param, twin in zip(params, twins):
            if rng.random() < 0.2:
                param.grad, twin.grad = None, None
            else:
                grad = rng.standard_normal(param.shape) * rng.choice([1e-3, 1.0, 10.0])
                param.grad, twin.grad = grad.copy(), torch.from_numpy(grad.copy())
        optimizer.step()
        twin_optimizer.step()


def assert_match(params, twins, optimizer, twin_optimizer):
    for index, (param, twin) in enumerate(zip(params, twins)):
        error = np.max(np.abs(param.data - twin.detach().numpy()))
        assert error <= TOL * max(1.0, np.max(np.abs(param.data))), f"param {index}: {error:.3e}"
        state, twin_state = optimizer.state.get(param, {}), twin_optimizer.state.get(twin, {})
        assert set(state) == set(twin_state), f"param {index} state keys"
        for key, value in state.items():
            expected = twin_state[key]
            expected = expected.item() if expected.ndim == 0 else expected.numpy()
            np.testing.assert_allclose(value, expected, rtol=TOL, atol=TOL * 1e-3,
                                       err_msg=f"param {index} state {key}")


param_shapes = st.lists(shapes(min_dims=1, max_dims=3), min_size=1, max_size=3)


@given(param_shapes, sgd_options, generators(), st.integers(1, 5))
def test_sgd_matches_torch(shapes_, options, rng, steps):
    params, twins, optimizer, twin_optimizer = make_pair(
        shapes_, rng, minigrad.optim.SGD, torch.optim.SGD, options)
    run_steps(params, twins, optimizer, twin_optimizer, rng, steps)
    assert_match(params, twins, optimizer, twin_optimizer)


@given(param_shapes, adam_options, generators(), st.integers(1, 5))
def test_adam_matches_torch(shapes_, options, rng, steps):
    params, twins, optimizer, twin_optimizer = make_pair(
        shapes_, rng, minigrad.optim.Adam, torch.optim.Adam, options)
    run_steps(params, twins, optimizer, twin_optimizer, rng, steps)
    assert_match(params, twins, optimizer, twin_optimizer)


@pytest.mark.parametrize("name", ["SGD", "Adam"])
def test_param_groups_take_their_own_options(name):
    rng = np.random.default_rng(0)
    values = [rng.standard_normal((3, 2)), rng.standard_normal(4)]
    params = [minigrad.nn.Parameter(v.copy()) for v in values]
    twins = [torch.nn.Parameter(torch.from_numpy(v.copy())) for v in values]
    extra = {"momentum": 0.9} if name == "SGD" else {}

    def groups(ps):
        return [{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.5, "weight_decay": 0.1}]

    optimizer = getattr(minigrad.optim, name)(groups(params), lr=0.01, **extra)
    twin_optimizer = getattr(torch.optim, name)(groups(twins), lr=0.01, **extra)
    assert optimizer.param_groups[0]["lr"] == 0.01 and optimizer.param_groups[1]["lr"] == 0.5
    run_steps(params, twins, optimizer, twin_optimizer, rng, steps=3)
    assert_match(params, twins, optimizer, twin_optimizer)


def test_changing_lr_in_a_group_takes_effect():
    param = minigrad.nn.Parameter(np.zeros(3))
    optimizer = minigrad.optim.SGD([param], lr=1.0)
    optimizer.param_groups[0]["lr"] = 0.25
    param.grad = np.ones(3)
    optimizer.step()
    np.testing.assert_array_equal(param.data, -0.25 * np.ones(3))


def test_step_runs_the_closure_with_gradients_enabled():
    param = minigrad.nn.Parameter(np.array([3.0]))
    optimizer = minigrad.optim.SGD([param], lr=0.1)

    def closure():
        optimizer.zero_grad()
        loss = (param * param).sum()
        loss.backward()
        return loss

    with minigrad.no_grad():
        loss = optimizer.step(closure)
    assert loss.item() == 9.0
    np.testing.assert_allclose(param.data, [3.0 - 0.1 * 6.0])


@pytest.mark.parametrize("make, message", [
    (lambda p: minigrad.optim.SGD(p, lr=-1.0), "Invalid learning rate"),
    (lambda p: minigrad.optim.SGD(p, momentum=-0.1), "Invalid momentum value"),
    (lambda p: minigrad.optim.SGD(p, nesterov=True), "Nesterov momentum requires"),
    (lambda p: minigrad.optim.SGD(p, weight_decay=-1.0), "Invalid weight_decay value"),
    (lambda p: minigrad.optim.Adam(p, betas=(1.0, 0.9)), "Invalid beta parameter at index 0"),
    (lambda p: minigrad.optim.Adam(p, betas=(0.9, -0.1)), "Invalid beta parameter at index 1"),
    (lambda p: minigrad.optim.Adam(p, eps=-1.0), "Invalid epsilon value"),
    (lambda p: minigrad.optim.Adam([], lr=0.1), "empty parameter list"),
    (lambda p: minigrad.optim.Adam([{"params": p}, {"params": p[:1]}]), "more than one"),
])
def test_bad_options_raise_like_torch(make, message):
    params = [minigrad.nn.Parameter(np.zeros(2)), minigrad.nn.Parameter(np.zeros(3))]
    with pytest.raises(ValueError, match=message):
        make(params)


def test_load_state_dict_checks_group_sizes():
    params = [minigrad.nn.Parameter(np.zeros(2)), minigrad.nn.Parameter(np.zeros(3))]
    saved = minigrad.optim.Adam(params).state_dict()
    with pytest.raises(ValueError, match="doesn't match the size"):
        minigrad.optim.Adam(params[:1]).load_state_dict(saved)


@given(param_shapes, adam_options, generators(), st.integers(1, 5))
def test_adamw_matches_torch(shapes_, options, rng, steps):
    """Decoupled weight decay: ``p *= 1 - lr * wd`` before the Adam step, not an L2 term."""
    params, twins, optimizer, twin_optimizer = make_pair(
        shapes_, rng, minigrad.optim.AdamW, torch.optim.AdamW, options)
    run_steps(params, twins, optimizer, twin_optimizer, rng, steps)
    assert_match(params, twins, optimizer, twin_optimizer)


def test_adamw_default_weight_decay_is_torchs():
    param = minigrad.nn.Parameter(np.ones(3))
    assert minigrad.optim.AdamW([param]).defaults["weight_decay"] == torch.optim.AdamW(
        [torch.nn.Parameter(torch.ones(3))]).defaults["weight_decay"] == 1e-2
