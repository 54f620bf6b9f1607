"""A custom Function whose backward returns None for an input that requires grad (legal in
torch and minigrad: no gradient flows there, a zero) is judged like any gradient: quiet where
the input's true gradient is zero, a GRADIENT_MISMATCH at its module where it is not. It used
to be "loss.backward() raised" (torch hands the point's hook a None)."""
import numpy as np
import pytest
import torch

import minigrad
from diagnostics import check_gradients

from .gradcheck_models import FRAMEWORKS, one_torch_thread
from .tools_helpers import NN


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


class _Scale(torch.autograd.Function):          # x * s, no gradient for s: a bug
    @staticmethod
    def forward(ctx, x, s):
        ctx.save_for_backward(s)
        return x * s

    @staticmethod
    def backward(ctx, grad):
        (s,) = ctx.saved_tensors
        return grad * s, None


class _Gate(torch.autograd.Function):           # x where s > 0: s's derivative is zero
    @staticmethod
    def forward(ctx, x, s):
        ctx.save_for_backward(s)
        return x * (s > 0)

    @staticmethod
    def backward(ctx, grad):
        (s,) = ctx.saved_tensors
        return grad * (s > 0), None


class _MgScale(minigrad.Function):
    @staticmethod
    def forward(ctx, x, s):
        ctx.save_for_backward(s)
        return x * s

    @staticmethod
    def backward(ctx, grad):
        (s,) = ctx.saved_tensors
        return grad * s, None


class _MgGate(minigrad.Function):
    @staticmethod
    def forward(ctx, x, s):
        ctx.save_for_backward(s)
        return x * (s > 0)

    @staticmethod
    def backward(ctx, grad):
        (s,) = ctx.saved_tensors
        return grad * (s > 0), None


FUNCTIONS = {("torch", "scale"): _Scale, ("torch", "gate"): _Gate,
             ("minigrad", "scale"): _MgScale, ("minigrad", "gate"): _MgGate}


def _model(framework, kind):
    """The Function inside a module, fed two module outputs (both points the check reads)."""
    nn = NN[framework]
    (torch.manual_seed if framework == "torch" else minigrad.manual_seed)(0)
    function = FUNCTIONS[framework, kind]

    class Op(nn.Module):
        def forward(self, x, s):
            return function.apply(x, s)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.side, self.out = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 2)
            self.op = Op()

        def forward(self, x):
            return self.out(self.op(self.fc(x), self.side(x)))

    rng = np.random.default_rng(0)
    return Net(), nn.CrossEntropyLoss(), rng.standard_normal((5, 4)), np.array([0, 1, 1, 0, 1])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_none_for_an_input_with_no_derivative_is_quiet(framework):
    report = check_gradients(*_model(framework, "gate"))
    assert report.passed and report.findings == [], str(report)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_none_for_an_input_with_a_derivative_is_a_mismatch_at_its_module(framework):
    report = check_gradients(*_model(framework, "scale"))
    assert not report.passed and report.culprits == ["op"], str(report)
    cause = report.causes[0]
    assert cause.path == "input" and cause.pattern.kind == "zeroed"
    assert set(report.faulty) == {"side.weight", "side.bias"}
