"""Built-in minigrad/torch model pairs for ``gradhunt compare``: an MLP, and a small CNN once
minigrad has the layers for it. Each pair comes with a batch and a loss name."""
import numpy as np

import minigrad

CNN_LAYERS = ("Conv2d", "MaxPool2d", "Flatten")


def available():
    """The names of the pairs this minigrad can build."""
    names = ["mlp"]
    if all(hasattr(minigrad.nn, layer) for layer in CNN_LAYERS):
        names.append("cnn")
    return names


def build_pair(name, *, seed=0):
    """``(minigrad_model, torch_model, loss, inputs, targets)`` for the pair ``name``."""
    import torch

    rng = np.random.default_rng(seed)
    builders = {"mlp": _mlp, "cnn": _cnn}
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        minigrad_model = builders[name](minigrad.nn)
        torch_model = builders[name](torch.nn)
    shape = (8, 12) if name == "mlp" else (4, 1, 8, 8)
    inputs = rng.standard_normal(shape)
    targets = rng.integers(0, 3, shape[0])
    return minigrad_model, torch_model, "cross_entropy", inputs, targets


def _mlp(nn):
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 3))


def _cnn(nn):
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
