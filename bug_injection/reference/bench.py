"""``Bench``: one reference setup on one backend — model, loss, optimizer, data, loop settings.

A planted bug changes a bench (a patched op, a swapped forward, other weights, other data,
another loop setting) for the length of a ``with`` block; a diagnostic then inspects it.
Benches are built fresh for every hunt run, from a seed, so runs never share state.
"""
import dataclasses
import importlib
from dataclasses import dataclass

import numpy as np

from diagnostics.backends import get_backend

from . import datasets
from .models import BACKENDS, reference_model


@dataclass(frozen=True)
class Loop:
    """The reference training loop's settings; a training-loop bug changes one of them."""

    steps: int = 100
    batch_size: int = 16
    lr: float = 0.1
    zero_grad: bool = True    # optimizer.zero_grad() before every backward
    eval_mode: bool = True    # model.eval() before the evaluation pass, model.train() after
    eval_every: int = 10      # an evaluation pass on the test set every this many steps


@dataclass(frozen=True)
class Setup:
    """What a bench is made of: an architecture, a data set, a loss, loop settings.

    ``logit_rms``: when set, the last layer is scaled so that the logits' root mean square on
    the training set is this (a confident classifier, whose logits reach the hundreds).
    """

    architecture: str
    data: str           # "blobs", "images", "regression" or "zen_text" (see ``datasets``)
    loss: str           # "cross_entropy", "mse" or "next_token" (a language model's)
    loop: Loop = Loop()
    logit_rms: float | None = None


SETUPS = {
    "mixed_mlp": Setup("mixed_mlp", "blobs", "cross_entropy"),
    "mlp": Setup("mlp", "blobs", "cross_entropy"),
    "confident_mlp": Setup("mlp", "blobs", "cross_entropy", Loop(lr=1e-3), logit_rms=60.0),
    "regressor": Setup("regressor", "regression", "mse"),
    "cnn": Setup("cnn", "images", "cross_entropy"),
    "layer_norm_net": Setup("layer_norm_net", "blobs", "cross_entropy"),
    "batch_norm_net": Setup("batch_norm_net", "blobs", "cross_entropy"),
    "deep_net": Setup("deep_net", "blobs", "cross_entropy", Loop(lr=0.05)),
    "tiny_gpt": Setup("tiny_gpt", "zen_text_8", "next_token", Loop(batch_size=8, lr=0.5)),
}


@dataclass
class Bench:
    """A model, its loss, an SGD optimizer, the data as the backend's tensors, and the loop."""

    setup: str
    backend: str
    model: object
    loss_fn: object
    optimizer: object
    train_x: object
    train_y: object
    test_x: object
    test_y: object
    loop: Loop

    @property
    def architecture(self):
        return SETUPS[self.setup].architecture

    # ---------------------------------------------------------- the framework
    @property
    def framework(self):
        """``minigrad`` or ``torch`` (the module: each backend is named after it)."""
        return importlib.import_module(self.backend)

    def tensor(self, array):
        """``array`` as a tensor of the bench's framework (dtype kept)."""
        return _to_tensor(self.model, array)

    def array(self, tensor):
        """A NumPy copy of a tensor (a parameter, a batch) of the bench's framework."""
        return get_backend(self.model).to_numpy(tensor)

    def write(self, name, array):
        """Overwrite parameter ``name``'s values in place."""
        get_backend(self.model).write_parameter(name, array)

    def sgd(self, parameters, *, lr):
        return self.framework.optim.SGD(list(parameters), lr=lr)

    def no_grad(self):
        return self.framework.no_grad()

    def module(self, name):
        return dict(self.model.named_modules())[name]

    def parameter(self, name):
        return dict(self.model.named_parameters())[name]


def make_bench(setup, backend, *, seed=0):
    """A fresh bench of ``setup`` (a key of ``SETUPS``) on ``backend``."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    recipe = SETUPS[setup]
    framework = importlib.import_module(backend)
    model = reference_model(recipe.architecture, backend, seed=seed)
    data = getattr(datasets, recipe.data)(seed=seed)
    bench = Bench(setup=setup, backend=backend, model=model,
                  loss_fn=_loss_module(framework.nn, recipe.loss),
                  optimizer=framework.optim.SGD(list(model.parameters()), lr=recipe.loop.lr),
                  loop=recipe.loop, train_x=_to_tensor(model, data.train_x),
                  train_y=_to_tensor(model, data.train_y),
                  test_x=_to_tensor(model, data.test_x), test_y=_to_tensor(model, data.test_y))
    if recipe.logit_rms is not None:
        _scale_last_layer(bench, recipe.logit_rms)
    return bench


def with_loop(bench, **changes):
    """``bench.loop`` with ``changes`` (a new frozen ``Loop``)."""
    return dataclasses.replace(bench.loop, **changes)


def _scale_last_layer(bench, logit_rms):
    with bench.no_grad():
        logits = bench.array(bench.model(bench.train_x))
    factor = logit_rms / np.sqrt(np.mean(logits.astype(np.float64) ** 2))
    last = [name for name, _ in bench.model.named_parameters()][-2:]   # weight, bias
    for name in last:
        bench.write(name, bench.array(bench.parameter(name)) * factor)


def _to_tensor(model, array):
    """A tensor of ``model``'s framework holding a copy of ``array``."""
    return get_backend(model).from_numpy(np.array(array, copy=True, order="C"))


def _loss_module(nn, loss):
    if loss == "next_token":
        from .gpt import gpt_classes

        return gpt_classes(nn).NextTokenLoss()
    return nn.CrossEntropyLoss() if loss == "cross_entropy" else nn.MSELoss()
