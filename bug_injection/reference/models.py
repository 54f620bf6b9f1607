"""Reference models: small minigrad/torch twins with the same weights, for bugs to be planted in.

Each architecture is one function of the ``nn`` namespace (``minigrad.nn`` or ``torch.nn``), so
the minigrad model and its torch twin are built by the same code; the torch twin then takes the
minigrad model's weights. Module names (``"2"``, ``"7"``) are what the catalogue's ground
truth refers to.
"""
import contextlib
import functools

import numpy as np

import minigrad

BACKENDS = ("minigrad", "torch")


def mixed_mlp(nn):
    """One of each op a gradient bug is planted in: a square ``Linear`` ("2", "4"), ReLU ("1"),
    Tanh ("3"), Sigmoid ("5"), and a custom module adding a shift with broadcasting ("7")."""
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8),
                         nn.Sigmoid(), nn.Linear(8, 4), offset_class(nn)(4))


def mlp(nn):
    """A plain ReLU classifier: 6 features, 4 classes."""
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, 4))


def regressor(nn):
    """A ReLU regressor with one output, for mean squared error."""
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))


def cnn(nn):
    """Two 3x3 convolutions on 1x6x6 images, max-pool, a linear head over 4 classes."""
    return nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.Conv2d(3, 4, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 4))


def layer_norm_net(nn):
    return nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 4))


def batch_norm_net(nn):
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 4))


DEEP_LAYERS = 10


def deep_net(nn):
    """``DEEP_LAYERS`` Linear+ReLU blocks of width 16 without normalization, He-initialised."""
    layers = [nn.Linear(6, 16), nn.ReLU()]
    for _ in range(DEEP_LAYERS - 1):
        layers += [nn.Linear(16, 16), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(16, 4))
    for module in model:
        if isinstance(module, nn.Linear):
            nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
            nn.init.zeros_(module.bias)
    return model


def tiny_gpt(nn):
    """A 1-block character-level GPT over the Zen of Python's characters (``gpt.py``), small
    so that a gradient check (thousands of forward passes) takes seconds. The layers keep
    their default initialisation (N(0, 1) embeddings): attention is far from uniform, so the
    query and key gradients are not negligible next to the value gradients."""
    from .gpt import GPTConfig, gpt_classes
    from .text import vocabulary

    return gpt_classes(nn).GPT(GPTConfig(vocab_size=len(vocabulary()), block_size=8, width=8,
                                         heads=2, layers=1, init_std=None))


ARCHITECTURES = {"mixed_mlp": mixed_mlp, "mlp": mlp, "regressor": regressor, "cnn": cnn,
                 "layer_norm_net": layer_norm_net, "batch_norm_net": batch_norm_net,
                 "deep_net": deep_net, "tiny_gpt": tiny_gpt}


def reference_model(name, backend, *, seed=0):
    """A fresh ``name`` model for ``backend``; the same weights for both backends at one seed.

    The weights are drawn by minigrad's generator, seeded here and put back as it was.
    """
    with _seeded_minigrad(seed):
        model = ARCHITECTURES[name](minigrad.nn)
    if backend == "minigrad":
        return model
    if backend != "torch":
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    return torch_twin(name, model)


def torch_twin(name, model):
    """The torch model of architecture ``name`` with ``model``'s (minigrad) weights and buffers."""
    import torch

    with torch.random.fork_rng(devices=[]):
        twin = ARCHITECTURES[name](torch.nn)
    state = {key: torch.from_numpy(np.array(value.data)) for key, value in
             model.state_dict().items()}
    twin.load_state_dict(state)
    return twin


@functools.cache
def offset_class(nn):
    """``Offset`` for the framework ``nn``: ``x + offset``, a learnable shift per feature."""

    class Offset(nn.Module):
        """A custom module: adds a learnable per-feature ``offset``, broadcast over the batch."""

        def __init__(self, features):
            super().__init__()
            self.offset = nn.Parameter(_zeros(nn, features))

        def forward(self, x):
            return x + self.offset

    return Offset


def _zeros(nn, size):
    if nn is minigrad.nn:
        return np.zeros(size, dtype=np.float32)
    import torch

    return torch.zeros(size)


@contextlib.contextmanager
def _seeded_minigrad(seed):
    saved = minigrad.get_rng_state()
    minigrad.manual_seed(seed)
    try:
        yield
    finally:
        minigrad.set_rng_state(saved)
