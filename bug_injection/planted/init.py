"""Initialisation bugs: weights that doom training before the first step.

The plants overwrite parameter values (or swap activation modules) and write the original
values back when the block ends, whatever happened to the weights in between.
"""
import contextlib

import numpy as np

from .patching import swapped_modules

NEGATIVE_CONSTANT = -1.0
LARGE_INIT_FACTOR = 3.0


def negative_constant_init(bench, module):
    """``module`` (a Linear fed by a ReLU, so its inputs are >= 0) initialised with the constant
    -1, weights and bias: every output is negative, and the ReLU after it never fires."""
    names = [f"{module}.weight", f"{module}.bias"]
    return _overwritten(bench, {n: lambda a: np.full_like(a, NEGATIVE_CONSTANT) for n in names})


def zero_init(bench):
    """Every weight matrix initialised to zero (biases as they were): all units of a layer
    compute the same thing, for every example, and stay symmetric."""
    return _overwritten(bench, {n: np.zeros_like for n in _weight_names(bench)})


def large_init(bench):
    """Every weight ``LARGE_INIT_FACTOR`` times its He-initialised value, in a deep net without
    normalization: activations and gradients grow by that factor per layer."""
    return _overwritten(bench, {n: lambda a: a * LARGE_INIT_FACTOR for n in _weight_names(bench)})


def sigmoid_activations(bench):
    """Every ReLU of the deep net replaced by a sigmoid (derivative at most 1/4 per layer)."""
    nn = bench.framework.nn
    relus = {name: nn.Sigmoid() for name, child in bench.model.named_children()
             if isinstance(child, nn.ReLU)}
    return swapped_modules(bench.model, relus)


def _weight_names(bench):
    return [name for name, param in bench.model.named_parameters()
            if name.endswith("weight") and len(param.shape) >= 2]


@contextlib.contextmanager
def _overwritten(bench, changes):
    """Parameters ``name -> change(values)`` for the block; the original values afterwards."""
    saved = {name: bench.array(bench.parameter(name)) for name in changes}
    try:
        for name, change in changes.items():
            bench.write(name, change(saved[name]))
        yield
    finally:
        for name, values in saved.items():
            bench.write(name, values)
