"""Small nets, data and training loops for the Monitor tests, written once for torch and minigrad.

``Framework`` is the framework module with its name: minigrad spells everything these tests
use (tensor construction, ``nn.functional``, seeding, layers, optimizers) as torch does.
"""
from dataclasses import dataclass

import numpy as np
import pytest

import minigrad
from diagnostics.backends import torch_threads
from diagnostics.monitor import Monitor

CLASSES = 4
FEATURES = 16


@dataclass(frozen=True)
class Framework:
    name: str
    module: object

    @property
    def nn(self):
        return self.module.nn

    @property
    def optim(self):
        return self.module.optim

    @property
    def F(self):
        return self.module.nn.functional      # minigrad.nn.functional is minigrad.functional

    def seed(self, seed):
        self.module.manual_seed(seed)

    def inputs(self, array):
        return self.module.tensor(np.asarray(array, dtype=np.float32))

    def labels(self, array):
        return self.module.tensor(np.asarray(array, dtype=np.int64))

    def no_grad(self):
        return self.module.no_grad()


@pytest.fixture
def one_torch_thread():
    """Tiny nets run much faster on one thread when the cores are shared; restored after."""
    with torch_threads(1):
        yield


def frameworks():
    import torch

    return [Framework("torch", torch), Framework("minigrad", minigrad)]


# ---------------------------------------------------------------------- data
def teacher_data(seed, *, n=512, features=FEATURES, classes=CLASSES):
    """Inputs N(0, 1) and labels from a random two-layer teacher: learnable, balanced-ish."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, features)).astype(np.float32)
    hidden = np.tanh(x @ rng.standard_normal((features, 32)))
    y = (hidden @ rng.standard_normal((32, classes))).argmax(axis=1)
    return x, y


def batches(x, y, *, steps, batch=64, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        index = rng.integers(0, len(x), batch)
        yield x[index], y[index]


# --------------------------------------------------------------------- models
def mlp(fw, sizes, activation="ReLU"):
    layers = []
    for index, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(fw.nn.Linear(fan_in, fan_out))
        if index < len(sizes) - 2:
            layers.append(getattr(fw.nn, activation)())
    return fw.nn.Sequential(*layers)


def functional_relu_mlp(fw, sizes=(FEATURES, 32, 32, CLASSES)):
    """An MLP that applies ReLU as a function in forward: no ReLU module for hooks to watch."""
    nn, relu = fw.nn, fw.F.relu

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(sizes[0], sizes[1])
            self.fc2 = nn.Linear(sizes[1], sizes[2])
            self.fc3 = nn.Linear(sizes[2], sizes[3])

        def forward(self, x):
            return self.fc3(relu(self.fc2(relu(self.fc1(x)))))

    return Net()


def residual_net(fw, width=32, blocks=3):
    nn = fw.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(width)
            self.fc1 = nn.Linear(width, width)
            self.act = nn.ReLU()
            self.fc2 = nn.Linear(width, width)

        def forward(self, x):
            return x + self.fc2(self.act(self.fc1(self.norm(x))))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Linear(FEATURES, width)
            self.blocks = nn.Sequential(*[Block() for _ in range(blocks)])
            self.head = nn.Linear(width, CLASSES)

        def forward(self, x):
            return self.head(self.blocks(self.stem(x)))

    return Net()


def cnn(fw):
    nn = fw.nn
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                         nn.Flatten(), nn.Linear(8 * 2 * 2, CLASSES))


def as_images(x):
    """The 16 features as 1x4x4 images, for the CNN."""
    return x.reshape(len(x), 1, 4, 4)


def detached_net(fw):
    """A two-layer net whose forward cuts the graph after fc1 (the planted NO_GRADIENT)."""
    nn = fw.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(FEATURES, 32)
            self.act = nn.ReLU()
            self.fc2 = nn.Linear(32, CLASSES)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x).detach()))

    return Net()


# ---------------------------------------------------------------------- loops
def train(fw, model, *, steps=60, lr=0.1, optimizer=None, zero_grad=True, data=None,
          scale=1.0, shuffle_labels=False, images=False, eval_every=0, batch=64, seed=0,
          monitor_options=None):
    """Train ``model`` with SGD on teacher data under a Monitor; returns the report.

    The keyword arguments plant the bugs: ``zero_grad=False``, ``scale`` for the inputs,
    ``shuffle_labels``, an ``optimizer`` built elsewhere, ``eval_every`` for no-grad passes
    that leave the model in training mode.
    """
    x, y = data if data is not None else teacher_data(seed)
    if shuffle_labels:
        y = np.random.default_rng(seed + 1).permutation(y)
    if images:
        x = as_images(x)
    optimizer = optimizer or fw.optim.SGD(model.parameters(), lr=lr)
    options = {"every": 1, "window": 10}
    options.update(monitor_options or {})
    with Monitor(model, optimizer, **options) as monitor:
        for step, (xb, yb) in enumerate(batches(x, y, steps=steps, batch=batch, seed=seed)):
            if zero_grad:
                optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb * scale)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            if eval_every and step % eval_every == 0:
                with fw.no_grad():
                    model(fw.inputs(x[:32] * scale))
    return monitor.report()
