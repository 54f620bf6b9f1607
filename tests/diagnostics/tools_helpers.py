"""Small models, data and a bit-for-bit state capture shared by the training-tool tests."""
import copy
import random

import numpy as np
import torch

import minigrad

FRAMEWORKS = ("torch", "minigrad")
NN = {"torch": torch.nn, "minigrad": minigrad.nn}
OPTIM = {"torch": torch.optim, "minigrad": minigrad.optim}


def classification_data(rows=32, features=8, classes=3, seed=0):
    """Gaussian inputs, labels from a random linear teacher: learnable, float32 and int64."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, features)).astype(np.float32)
    y = np.argmax(x @ rng.standard_normal((features, classes)), axis=1).astype(np.int64)
    return x, y


def mlp(framework, sizes=(8, 16, 3), *, seed=0):
    """Linear/ReLU stack with torch's default init, seeded per framework."""
    (torch.manual_seed if framework == "torch" else minigrad.manual_seed)(seed)
    nn, layers = NN[framework], []
    for index, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(fan_in, fan_out))
        if index < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def cross_entropy(framework):
    return NN[framework].CrossEntropyLoss()


def tensor(framework, array):
    return torch.from_numpy(array) if framework == "torch" else minigrad.tensor(array)


def take_steps(framework, model, optimizer, x, y, steps=2):
    """A few ordinary training steps, so the optimizer has moments and the params have grads."""
    loss_fn = cross_entropy(framework)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(tensor(framework, x)), tensor(framework, y))
        loss.backward()
        optimizer.step()


def capture(model, optimizer=None):
    """Everything the tools promise to keep: parameters, grads, modes, optimizer state, RNGs."""
    params = {name: (_array(p), None if p.grad is None else _array(p.grad), bool(p.requires_grad))
              for name, p in model.named_parameters()}
    return {
        "params": params,
        "buffers": {name: _array(b) for name, b in model.named_buffers()},
        "training": {name: m.training for name, m in model.named_modules()},
        "optimizer": None if optimizer is None else _plain(optimizer.state_dict()),
        "rng": {"numpy": np.random.get_state()[1].copy(), "python": random.getstate(),
                "torch": torch.get_rng_state().numpy().copy(),
                "minigrad": copy.deepcopy(minigrad.get_rng_state())},
    }


def assert_same(before, after):
    """Bit-for-bit equality of two ``capture`` results."""
    assert before.keys() == after.keys()
    _compare(before, after, "state")


def _compare(a, b, where):
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            _compare(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for index, (x, y) in enumerate(zip(a, b)):
            _compare(x, y, f"{where}[{index}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, where
        np.testing.assert_array_equal(a, b, err_msg=where, strict=True)
    else:
        assert a == b, where


def _array(tensor):
    if isinstance(tensor, torch.Tensor):
        return tensor.detach().clone().numpy()
    data = tensor.data if isinstance(tensor, minigrad.Tensor) else tensor
    return np.array(data, copy=True)


def _plain(value):
    """An optimizer state dict with every tensor turned into an ndarray copy."""
    if isinstance(value, dict):
        return {key: _plain(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (torch.Tensor, minigrad.Tensor, np.ndarray)):
        return _array(value)
    return copy.deepcopy(value)
