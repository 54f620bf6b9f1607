"""A minigrad model and its torch twin, built by the same code with the same weights, agree.

Each architecture is one function of the ``nn`` namespace (``minigrad.nn`` or ``torch.nn``), so
the two models are twins by construction; weights go from torch to minigrad through
``state_dict``/``load_state_dict``. Everything runs in float64 and must agree to 1e-10.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import minigrad
import minigrad.functional as F

TOL = 1e-10


# ----------------------------------------------------------------------------- architectures
def mlp(nn):
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))


def small_cnn(nn):
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(4, 5, 2, stride=2), nn.ReLU(), nn.Flatten(),
                         nn.Linear(5 * 2 * 2, 3))


def layer_norm_net(nn):
    return nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.GELU(), nn.Dropout(0.3),
                         nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Sigmoid(), nn.Linear(8, 3))


def residual_net(nn):
    class Block(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.fc1 = nn.Linear(width, width)
            self.act = nn.ReLU()
            self.fc2 = nn.Linear(width, width)
            self.norm = nn.LayerNorm(width)

        def forward(self, x):
            return self.norm(x + self.fc2(self.act(self.fc1(x))))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Linear(6, 8)
            self.blocks = nn.Sequential(Block(8), Block(8))
            self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(8, 3))

        def forward(self, x):
            return self.head(self.blocks(self.stem(x)))

    return nn.Sequential(nn.Linear(6, 6), Block(6), Net())


# name -> (builder, input shape, put in eval mode before comparing)
ARCHITECTURES = {
    "mlp": (mlp, (5, 6), False),
    "small_cnn": (small_cnn, (6, 1, 8, 8), False),
    "layer_norm_eval": (layer_norm_net, (5, 6), True),
    "residual": (residual_net, (5, 6), True),
}


# ----------------------------------------------------------------------------------- helpers
def make_twins(name):
    """(minigrad model, torch model, inputs, targets) in float64 with torch's weights in both."""
    build, input_shape, in_eval = ARCHITECTURES[name]
    torch.manual_seed(0)
    twin = build(torch.nn).double()
    model = build(minigrad.nn).double()
    model.load_state_dict(twin.state_dict())
    if in_eval:
        twin.eval()
        model.eval()
    rng = np.random.default_rng(1)
    x = rng.standard_normal(input_shape)
    targets = rng.integers(0, 3, size=input_shape[0])
    return model, twin, x, targets


def losses(model, twin, x, targets):
    loss = F.cross_entropy(model(minigrad.tensor(x)), minigrad.tensor(targets))
    twin_loss = TF.cross_entropy(twin(torch.from_numpy(x)), torch.from_numpy(targets))
    return loss, twin_loss


def assert_close(actual, expected, what):
    expected = expected.detach().numpy() if isinstance(expected, torch.Tensor) else expected
    actual = actual.data if isinstance(actual, minigrad.Tensor) else actual
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} vs {expected.shape}"
    error = float(np.max(np.abs(actual - expected), initial=0.0))
    assert error <= TOL, f"{what}: max abs difference {error:.3e} > {TOL}"


def torch_state(model):
    return {name: torch.from_numpy(value.data.copy()) for name, value in model.state_dict().items()}


def assert_same_state(model, twin):
    """Parameters and buffers (batch-norm statistics, counters) equal by name."""
    state, twin_state = model.state_dict(), twin.state_dict()
    assert list(state) == list(twin_state)
    for name, value in state.items():
        assert_close(value, twin_state[name], name)


def make_optimizers(kind, model, twin):
    if kind == "sgd":
        options = {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-2}
        return minigrad.optim.SGD(model.parameters(), **options), torch.optim.SGD(
            twin.parameters(), **options)
    options = {"lr": 1e-2, "betas": (0.8, 0.99), "weight_decay": 1e-2}
    return minigrad.optim.Adam(model.parameters(), **options), torch.optim.Adam(
        twin.parameters(), **options)


def train(model, optimizer, x, targets, steps):
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(minigrad.tensor(x)), minigrad.tensor(targets))
        loss.backward()
        optimizer.step()


# ------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_names_and_shapes_match(name):
    model, twin, _, _ = make_twins(name)
    assert [(n, p.shape) for n, p in model.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in twin.named_parameters()]
    assert [n for n, _ in model.named_modules()] == [n for n, _ in twin.named_modules()]
    assert [(n, b.shape) for n, b in model.named_buffers()] == [
        (n, tuple(b.shape)) for n, b in twin.named_buffers()]


def test_nested_names_are_spelled_like_torch():
    model, _, _, _ = make_twins("residual")
    names = dict(model.named_parameters())
    assert {"1.fc1.weight", "2.blocks.1.fc2.bias", "2.head.1.weight", "1.norm.weight"} <= set(names)
    assert "2.blocks.0.act" in dict(model.named_modules())


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_outputs_gradients_and_statistics_match(name):
    model, twin, x, targets = make_twins(name)
    loss, twin_loss = losses(model, twin, x, targets)
    assert_close(loss, twin_loss, "loss")
    loss.backward()
    twin_loss.backward()
    twin_params = dict(twin.named_parameters())
    for param_name, param in model.named_parameters():
        assert_close(param.grad, twin_params[param_name].grad, f"grad of {param_name}")
    assert_same_state(model, twin)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_five_optimizer_steps_match(name, kind):
    model, twin, x, targets = make_twins(name)
    optimizer, twin_optimizer = make_optimizers(kind, model, twin)
    for step in range(5):
        optimizer.zero_grad()
        twin_optimizer.zero_grad()
        loss, twin_loss = losses(model, twin, x, targets)
        assert_close(loss, twin_loss, f"loss at step {step}")
        loss.backward()
        twin_loss.backward()
        optimizer.step()
        twin_optimizer.step()
    assert_same_state(model, twin)
    model.eval()
    twin.eval()
    assert_close(model(minigrad.tensor(x)), twin(torch.from_numpy(x)), "eval output after training")


def test_train_and_eval_switch_dropout_and_batch_norm():
    model, twin, x, _ = make_twins("layer_norm_eval")
    dropout, batch_norm = model[3], model[5]
    model.train()
    assert all(module.training for module in model.modules())
    minigrad.manual_seed(3)
    first, second = model(minigrad.tensor(x)), model(minigrad.tensor(x))
    assert not np.array_equal(first.data, second.data)  # fresh dropout masks
    assert int(batch_norm.num_batches_tracked.item()) == 2
    model.eval()
    assert not any(module.training for module in model.modules()) and not dropout.training
    before = batch_norm.running_mean.data.copy()
    out = model(minigrad.tensor(x))
    assert np.array_equal(out.data, model(minigrad.tensor(x)).data)
    assert np.array_equal(batch_norm.running_mean.data, before)
    twin.load_state_dict(torch_state(model))
    assert_close(out, twin(torch.from_numpy(x)), "eval output with running statistics")


def test_dropout_draws_from_minigrad_generator():
    layer = minigrad.nn.Dropout(0.5)
    x = minigrad.ones((4, 50), dtype=np.float64)
    minigrad.manual_seed(7)
    first = layer(x)
    minigrad.manual_seed(7)
    assert np.array_equal(first.data, layer(x).data)
    assert set(np.unique(first.data)) == {0.0, 2.0}


def test_state_dict_round_trip():
    model, twin, x, targets = make_twins("small_cnn")
    train(model, minigrad.optim.SGD(model.parameters(), lr=0.1), x, targets, steps=2)
    copy = small_cnn(minigrad.nn).double()
    copy.load_state_dict(model.state_dict())
    for (name, value), (_, copied) in zip(model.state_dict().items(), copy.state_dict().items()):
        assert np.array_equal(value.data, copied.data), name
        assert value.data is not copied.data, f"{name} is shared after load_state_dict"
    model.eval()
    copy.eval()
    assert np.array_equal(model(minigrad.tensor(x)).data, copy(minigrad.tensor(x)).data)
    twin.load_state_dict(torch_state(model))
    assert_same_state(model, twin)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_optimizer_state_dict_restores_bit_for_bit(kind):
    model, twin, x, targets = make_twins("small_cnn")
    optimizer, _ = make_optimizers(kind, model, twin)
    train(model, optimizer, x, targets, steps=2)
    saved_model = {k: v.data.copy() for k, v in model.state_dict().items()}
    saved = optimizer.state_dict()
    train(model, optimizer, x, targets, steps=3)
    expected = {k: v.data.copy() for k, v in model.state_dict().items()}
    assert len(saved["state"]) == len(list(model.parameters()))
    for index, param in enumerate(model.parameters()):  # the snapshot holds copies
        for key, value in optimizer.state[param].items():
            if isinstance(value, np.ndarray):
                assert not np.shares_memory(value, saved["state"][index][key]), key

    model.load_state_dict(saved_model)
    optimizer.load_state_dict(saved)
    train(model, optimizer, x, targets, steps=3)
    for name, value in model.state_dict().items():
        assert np.array_equal(value.data, expected[name]), name


def test_optimizer_state_dict_matches_torch_layout():
    model, twin, x, targets = make_twins("mlp")
    optimizer, twin_optimizer = make_optimizers("adam", model, twin)
    train(model, optimizer, x, targets, steps=1)
    twin_optimizer.zero_grad()
    losses(model, twin, x, targets)[1].backward()
    twin_optimizer.step()
    state, twin_state = optimizer.state_dict(), twin_optimizer.state_dict()
    assert list(state["state"]) == list(twin_state["state"])
    assert all(set(s) == set(twin_state["state"][i]) for i, s in state["state"].items())
    assert state["param_groups"][0]["params"] == twin_state["param_groups"][0]["params"]
    assert state["param_groups"][0]["betas"] == twin_state["param_groups"][0]["betas"]


def test_zero_grad_semantics():
    model, _, x, targets = make_twins("mlp")
    optimizer = minigrad.optim.SGD(model.parameters(), lr=0.1)

    def backward():
        F.cross_entropy(model(minigrad.tensor(x)), minigrad.tensor(targets)).backward()

    backward()
    once = {n: p.grad.copy() for n, p in model.named_parameters()}
    backward()  # without zero_grad the gradients add up
    for name, param in model.named_parameters():
        np.testing.assert_allclose(param.grad, 2 * once[name], rtol=1e-12)
    arrays = {n: p.grad for n, p in model.named_parameters()}
    optimizer.zero_grad(set_to_none=False)
    for name, param in model.named_parameters():
        assert param.grad is arrays[name] and not param.grad.any()
    optimizer.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    backward()
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_step_skips_parameters_without_gradients():
    model, _, _, _ = make_twins("mlp")
    optimizer = minigrad.optim.Adam(model.parameters(), lr=0.1)
    before = [p.data.copy() for p in model.parameters()]
    optimizer.step()
    assert optimizer.state == {}
    assert all(np.array_equal(b, p.data) for b, p in zip(before, model.parameters()))


def test_optimizer_updates_parameter_arrays_in_place():
    model, _, x, targets = make_twins("mlp")
    arrays = [p.data for p in model.parameters()]
    train(model, minigrad.optim.Adam(model.parameters(), lr=0.1), x, targets, steps=1)
    assert all(p.data is a for p, a in zip(model.parameters(), arrays))
