"""``Case``: one reproduction, built fresh: the user's model, loss, optimizer, loop and data.

A corpus entry's ``buggy(framework)`` and ``fixed(framework)`` each return a ``Case`` built in
``"torch"`` or ``"minigrad"`` (minigrad mirrors torch's API, so a reproduction whose layers
minigrad has is written once); the runner hands it to the tool the entry names. Everything
is tiny and seeded so that a case runs in well under a second on a CPU and gives the same
findings every time.
"""
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

STEPS, BATCH = 40, 16


@dataclass(kw_only=True)
class Case:
    """What the tools need from a reproduction; fields a tool does not use stay None.

    ``train(after_step)`` runs the user's loop and calls ``after_step(loss)`` after every
    optimizer step (the Monitor's ``step``). ``scaler``: the loop's GradScaler, handed to
    the Monitor as a user with AMP does (``Monitor(scaler=...)``). ``inputs``/``targets``: one
    training batch (preflight, check_gradients, batch independence). ``data``: the keyword
    arguments of ``validate_data``. ``label_batches``: the labels of the batches in the order
    the loop trains on them."""

    model: object = None
    loss_fn: Callable | None = None
    optimizer: object = None
    train: Callable | None = None
    scaler: object = None
    inputs: object = None
    targets: object = None
    causal: bool = False
    data: dict = field(default_factory=dict)
    label_batches: list | None = None


FRAMEWORKS = ("torch", "minigrad")


def framework_module(framework):
    """The ``torch`` or ``minigrad`` module, imported on first use."""
    if framework == "torch":
        import torch
        return torch
    if framework == "minigrad":
        import minigrad
        return minigrad
    raise ValueError(f"framework: expected one of {FRAMEWORKS}, got {framework!r}")


def torch_module():
    return framework_module("torch")


def blobs(rows=128, features=8, classes=4, *, seed=0, spread=1.0):
    """Gaussian class clusters, float32 features and int64 labels, classes interleaved."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((classes, features)) * 2.0
    labels = np.arange(rows) % classes
    rng.shuffle(labels)
    x = centers[labels] + spread * rng.standard_normal((rows, features))
    return x.astype(np.float32), labels.astype(np.int64)


def tensors(*arrays, framework="torch"):
    """The arrays as ``framework``'s tensors, dtypes kept."""
    if framework == "minigrad":
        minigrad = framework_module(framework)
        return tuple(minigrad.tensor(np.ascontiguousarray(a)) for a in arrays)
    torch = framework_module(framework)
    return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays)


def batches(rows, size=BATCH, steps=STEPS):
    """``(step, start, stop)`` of consecutive minibatches, wrapping around the data."""
    for step in range(steps):
        start = (step * size) % rows
        yield step, start, start + size


def mlp(features=8, hidden=32, outputs=4, *, seed=0, dropout=0.0, framework="torch"):
    fw = framework_module(framework)
    fw.manual_seed(seed)
    layers = [fw.nn.Linear(features, hidden), fw.nn.ReLU()]
    if dropout:
        layers.append(fw.nn.Dropout(dropout))
    layers.append(fw.nn.Linear(hidden, outputs))
    return fw.nn.Sequential(*layers)


def nll_loss(log_probs, targets):
    """``nn.NLLLoss()`` for minigrad, which lacks it: minus the mean target log-probability."""
    return -log_probs.gather(1, targets[:, None]).mean()


def simple_loop(model, optimizer, loss_fn, x, y, *, steps=STEPS, size=BATCH):
    """The plain loop: zero_grad, forward, loss, backward, step."""
    def train(after_step):
        for _, start, stop in batches(len(x), size, steps):
            optimizer.zero_grad()
            loss = loss_fn(model(x[start:stop]), y[start:stop])
            loss.backward()
            optimizer.step()
            after_step(loss)
    return train
