"""Training-loop bugs: what the user's loop does wrong around a correct model.

Each plant changes the bench the reference loop (``loop.train``) runs on — a loop setting,
the optimizer, a module's forward, the labels — and puts it back when the block ends.
"""
import contextlib

import numpy as np

from ..reference.bench import with_loop
from ..reference.models import reference_model
from .patching import patched_attribute, swapped_forward

HIGH_LR = 10.0
SHUFFLE_SEED = 12345


def missing_zero_grad(bench):
    """The loop never calls ``optimizer.zero_grad()``: gradients pile up step after step."""
    return patched_attribute(bench, "loop", with_loop(bench, zero_grad=False))


def learning_rate_too_high(bench):
    """SGD with lr=10 instead of the bench's rate."""
    return patched_attribute(bench, "optimizer", bench.sgd(bench.model.parameters(), lr=HIGH_LR))


def optimizer_over_other_parameters(bench):
    """The optimizer was built over another model's parameters (a copy made before training)."""
    other = reference_model(bench.architecture, bench.backend, seed=1)
    optimizer = bench.sgd(other.parameters(), lr=bench.loop.lr)
    return patched_attribute(bench, "optimizer", optimizer)


def detached_graph(bench, module):
    """``module``'s output is detached in forward: nothing before it gets a gradient."""
    def forward(self, x):
        return type(self).forward(self, x).detach()
    return swapped_forward(bench.module(module), forward)


def eval_mode_forgotten(bench):
    """The evaluation pass runs without ``model.eval()``: batch norm keeps training mode."""
    return patched_attribute(bench, "loop", with_loop(bench, eval_mode=False))


def labels_shuffled(bench):
    """The training labels were shuffled on their own, apart from their inputs."""
    order = np.random.default_rng(SHUFFLE_SEED).permutation(bench.train_y.shape[0])
    return patched_attribute(bench, "train_y", bench.tensor(bench.array(bench.train_y)[order]))


def float_labels(bench):
    """Class labels stored as floats (1.0, 3.0, ...) for cross-entropy, which wants int64."""
    labels = bench.array(bench.train_y).astype(np.float32)
    return patched_attribute(bench, "train_y", bench.tensor(labels))


@contextlib.contextmanager
def targets_broadcasting(bench):
    """Regression targets of shape (N,) against outputs of shape (N, 1): the loss broadcasts
    them to (N, N) and averages every output against every target."""
    with contextlib.ExitStack() as stack:
        for field in ("train_y", "test_y"):
            flat = bench.array(getattr(bench, field)).reshape(-1)
            stack.enter_context(patched_attribute(bench, field, bench.tensor(flat)))
        yield
