"""The patch primitives: exact restore, scoping by a marker, binding across deep copies."""
import copy

import numpy as np
import pytest

import minigrad
from minigrad.ops import activation, linalg
from bug_injection.planted.patching import (marked, patched_attribute, patched_backward,
                                    swapped_forward)


class Base:
    value = "base"


class Child(Base):
    pass


def test_patched_attribute_restores_own_and_inherited_attributes():
    with patched_attribute(Child, "value", "patched"):
        assert Child.value == "patched"
    assert "value" not in vars(Child) and Child.value == "base"
    own = object()
    Child.own = own
    try:
        with pytest.raises(RuntimeError):
            with patched_attribute(Child, "own", 1):
                raise RuntimeError
        assert Child.own is own
    finally:
        del Child.own


def _two_linears_backward():
    minigrad.manual_seed(0)
    x = minigrad.tensor(np.arange(6.0).reshape(2, 3))
    a, b = minigrad.nn.Linear(3, 3, dtype=np.float64), minigrad.nn.Linear(3, 3, dtype=np.float64)
    return a, b, lambda: b(a(x)).sum().backward()


def test_patched_backward_is_scoped_by_the_marker():
    right_a, right_b, run = _two_linears_backward()
    run()
    a, b, run = _two_linears_backward()

    def zeroed(right, ctx, grad):
        return tuple(None if g is None else 0 * g for g in right(ctx, grad))

    with marked(b.weight, "_test_marker"), patched_backward(linalg.Linear, zeroed,
                                                            marker="_test_marker"):
        run()
    assert not np.any(b.weight.grad)                 # the marked call got the wrong formula
    np.testing.assert_array_equal(b.bias.grad, 0 * right_b.bias.grad)
    assert not np.any(a.weight.grad)                 # a's gradient flows through b's input grad
    a, b, run = _two_linears_backward()
    with marked(a.weight, "_test_marker"), patched_backward(linalg.Linear, zeroed,
                                                            marker="_test_marker"):
        run()
    np.testing.assert_array_equal(b.weight.grad, right_b.weight.grad)   # b stays right
    assert not np.any(a.weight.grad)
    assert not hasattr(a.weight, "_test_marker")


def test_unscoped_patch_applies_to_every_call():
    x = minigrad.tensor(np.array([-1.0, 2.0]), requires_grad=True)
    with patched_backward(activation.ReLU, lambda right, ctx, grad: (grad,)):
        minigrad.functional.relu(x).sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0, 1.0])
    x.grad = None
    minigrad.functional.relu(x).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 1.0])


def test_swapped_forward_binds_to_a_deep_copy():
    model = minigrad.nn.Sequential(minigrad.nn.Linear(2, 2))

    def forward(self, x):
        return x * 0 + self.weight.sum()

    with swapped_forward(model[0], forward):
        twin = copy.deepcopy(model)
        twin[0].weight.data[...] = 1.0
        out = twin(minigrad.tensor(np.zeros((1, 2), dtype=np.float32)))
        assert np.all(out.data == 4.0)               # the copy's own weight, not the original's
    assert "forward" not in vars(model[0])
