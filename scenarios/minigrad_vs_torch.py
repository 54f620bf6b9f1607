"""The same nets in minigrad and in torch: every parameter gradient agrees to 1e-10.

Each net is built twice from one constructor that takes the framework's ``nn`` namespace, so
parameter names and shapes match (``"0.weight"`` in both). ``compare_gradients`` copies torch's
weights into minigrad, runs one batch of digits through both in float64 and compares the
gradients parameter by parameter. A control plants a transposed weight gradient in one
minigrad layer: the comparison must then disagree on that parameter and on no other.
"""
import numpy as np
import torch

import minigrad
from bug_injection.planted import formulas
from bug_injection.planted.functions import spoiled_function
from diagnostics import compare_gradients
from diagnostics.backends import torch_threads

from . import digits
from .localize_gradient_bug import HandWrittenLinear
from .result import ScenarioResult

NAME = "minigrad_vs_torch"
TITLE = "the same nets in minigrad and torch; gradients agree to 1e-10"
RTOL = 1e-10
ATOL = 1e-13


def cnn(nn):
    """Conv, batch norm, max-pool, layer norm, GELU, dropout: 8x8 images to 10 classes."""
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.Tanh(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(64, 32), nn.LayerNorm(32), nn.GELU(), nn.Dropout(0.1), nn.Linear(32, 10))


def mlp(nn, *, square=None):
    """Linear layers with leaky ReLU and sigmoid; layer ``"2"`` is square (``square`` builds
    it instead of ``nn.Linear(32, 32)`` when given)."""
    middle = square() if square is not None else nn.Linear(32, 32)
    return nn.Sequential(nn.Linear(64, 32), nn.LeakyReLU(0.1), middle, nn.Sigmoid(),
                         nn.Linear(32, 10))


def mlp_with_planted_bug(nn):
    """``mlp`` whose layer ``"2"`` (minigrad only) returns its weight gradient transposed."""
    weight_transposed = spoiled_function("minigrad", "linear", 1, formulas.transposed)
    return mlp(nn, square=lambda: HandWrittenLinear(32, 32, function=weight_transposed))


PAIRS = (  # (label, builder, loss, images?)
    ("CNN, cross-entropy with integer labels", cnn, "cross_entropy", True),
    ("MLP, cross-entropy with integer labels", mlp, "cross_entropy", False),
    ("MLP, mean squared error on one-hot targets", mlp, "mse", False),
)


def run(*, fast=False):
    """Compare every pair on one batch per seed; ``fast`` uses one seed and batches of 16."""
    result = ScenarioResult(NAME, TITLE, fast)
    with result.timed(), torch_threads(1):
        seeds = (0,) if fast else (0, 1, 2)
        batch = 16 if fast else 64
        split = digits.load_split()
        worst = 0.0
        for label, builder, loss, images in PAIRS:
            for seed in seeds:
                report = _compare(builder, builder, loss, images=images, split=split,
                                  seed=seed, batch=batch)
                result.section(f"{label} (seed {seed}, batch {batch})")
                result.say(report)
                largest = max(p.max_abs_error for p in report.parameters)
                worst = max(worst, largest)
                result.check(f"{label}, seed {seed}: every gradient element agrees to "
                             f"{RTOL:g} relative ({ATOL:g} absolute)", report.passed,
                             f"max absolute difference {largest:.1e}")
        result.say(f"largest absolute difference of any gradient element, over all nets and "
                   f"seeds: {worst:.1e} (a relative error means little where both gradients "
                   f"are rounding noise, like a conv bias right before batch norm)")
        report = _compare(mlp_with_planted_bug, mlp, "cross_entropy", images=False,
                          split=split, seed=0, batch=batch)
        result.section("control: minigrad's layer '2' returns its weight gradient transposed")
        result.say(report)
        disagree = [p.name for p in report.parameters if not p.passed]
        result.check("control: the comparison disagrees on 2.weight and nothing else",
                     disagree == ["2.weight"], f"disagree: {', '.join(disagree) or 'none'}")
    return result


def _compare(minigrad_builder, torch_builder, loss, *, images, split, seed, batch):
    minigrad.manual_seed(seed)
    minigrad_model = minigrad_builder(minigrad.nn)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        torch_model = torch_builder(torch.nn)
    rows = np.random.default_rng(seed).choice(len(split.x_train), size=batch, replace=False)
    inputs = split.x_train[rows]
    if images:
        inputs = digits.as_images(inputs)
    targets = split.y_train[rows]
    if loss == "mse":
        targets = np.eye(digits.CLASSES)[targets]
    return compare_gradients(minigrad_model, torch_model, loss, inputs, targets, rtol=RTOL,
                             atol=ATOL)
