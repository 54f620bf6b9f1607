"""One wrong formula, two frameworks: a spoiled op gives the same gradients on minigrad and torch
(float64), differs from the right op in the spoiled gradient only, and leaves state alone."""
import numpy as np
import pytest
import torch

import minigrad
from bug_injection.planted import formulas
from bug_injection.planted.functions import right_call, spoiled_function

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 4))
SQUARE = RNG.standard_normal((4, 4))
IMAGES = RNG.standard_normal((2, 2, 5, 5))
KERNEL = RNG.standard_normal((3, 2, 3, 3))
LABELS = np.array([0, 3, 1, 1, 2])

# (op kind, spoiled gradient, formula, arguments: arrays become tensors that require grad)
CASES = [
    ("linear", 0, formulas.input_with_weight_transposed, (X, SQUARE, RNG.standard_normal(4))),
    ("linear", 1, formulas.transposed, (X, SQUARE, RNG.standard_normal(4))),
    ("linear", 2, formulas.bias_mean, (X, SQUARE, RNG.standard_normal(4))),
    ("linear", 1, formulas.last_row_zeroed, (X, SQUARE, RNG.standard_normal(4))),
    ("relu", 0, formulas.mask_dropped, (X,)),
    ("relu", 0, formulas.mask_half_kept, (X,)),
    ("sigmoid", 0, formulas.sigmoid_without_one_minus, (X,)),
    ("tanh", 0, formulas.tanh_without_square, (X,)),
    ("tanh", 0, formulas.tanh_plus_square, (X,)),
    ("conv2d", 0, formulas.conv_input_unflipped, (IMAGES, KERNEL, RNG.standard_normal(3), 2, 1)),
    ("conv2d", 1, formulas.doubled, (IMAGES, KERNEL, RNG.standard_normal(3), 1, 1)),
    ("max_pool2d", 0, formulas.tripled, (IMAGES, 2, None, 0)),
    ("add", 1, formulas.first_slice, (X, RNG.standard_normal(4))),
    ("layer_norm", 0, formulas.layer_norm_mean_dropped,
     (X, (4,), RNG.standard_normal(4), RNG.standard_normal(4), 1e-5)),
    ("layer_norm", 0, formulas.layer_norm_terms_dropped,
     (X, (4,), RNG.standard_normal(4), RNG.standard_normal(4), 1e-5)),
    ("batch_norm", 0, formulas.batch_norm_mean_dropped,
     (X, None, None, RNG.standard_normal(4), RNG.standard_normal(4), True, 0.1, 1e-5)),
    ("cross_entropy", 0, formulas.times_batch_size, (X, LABELS, "mean", -100, 0.0)),
    ("mse", 0, formulas.halved, (X, RNG.standard_normal((5, 4)))),
]


def _gradients(backend, function, args):
    """d sum(out * probe) / d each array argument (None where it is not a float array)."""
    module = minigrad if backend == "minigrad" else torch
    tensors = [module.tensor(a, requires_grad=a.dtype.kind == "f")
               if isinstance(a, np.ndarray) else a for a in args]
    out = function(*tensors)
    probe = np.linspace(-1.0, 1.0, int(np.prod(out.shape)) or 1).reshape(out.shape)
    (out * module.tensor(probe)).sum().backward()
    return [None if not isinstance(t, module.Tensor) or t.grad is None
            else (t.grad.data if backend == "minigrad" else t.grad.numpy()) for t in tensors]


@pytest.mark.parametrize("kind, index, formula, args", CASES,
                         ids=[f"{k}-{f.__name__}" for k, _, f, _ in CASES])
def test_the_formula_spoils_one_gradient_alike_on_both_frameworks(kind, index, formula, args):
    per_framework = {}
    for backend in ("minigrad", "torch"):
        wrong = _gradients(backend, spoiled_function(backend, kind, index, formula).apply, args)
        right = _gradients(backend, lambda *a: right_call(backend, kind, *a), args)
        assert not np.allclose(wrong[index], right[index])
        for i, (w, r) in enumerate(zip(wrong, right)):
            if i != index and r is not None:
                np.testing.assert_allclose(w, r, rtol=1e-12, atol=1e-12)
        per_framework[backend] = wrong
    for mine, theirs in zip(per_framework["minigrad"], per_framework["torch"]):
        assert (mine is None) == (theirs is None)
        if mine is not None:
            np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-12)


def test_torch_batch_norm_running_statistics_are_updated_once():
    """The right gradients are recomputed in backward on copies: the running statistics move
    once per forward, as with torch's own batch norm."""
    x = torch.tensor(X, requires_grad=True)
    weight, bias = (torch.tensor(RNG.standard_normal(4), requires_grad=True) for _ in range(2))
    mine, theirs = (torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64))
    right_mean, right_var = mine.clone(), theirs.clone()
    function = spoiled_function("torch", "batch_norm", 0, formulas.batch_norm_mean_dropped)
    function.apply(x, mine, theirs, weight, bias, True, 0.1, 1e-5).sum().backward()
    torch.nn.functional.batch_norm(x.detach(), right_mean, right_var, None, None, True, 0.1, 1e-5)
    assert torch.equal(mine, right_mean) and torch.equal(theirs, right_var)


def test_the_function_is_named_after_its_formula():
    assert spoiled_function("torch", "linear", 0, formulas.transposed).__name__ == (
        "linear_transposed")
    assert spoiled_function("minigrad", "linear", 0, formulas.transposed).__name__ == (
        "Linear_transposed")
