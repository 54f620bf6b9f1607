"""Replayed runs (only the modules from a perturbation on) and forward-first differences.

A replayed run must give the loss of a full run exactly, in float64, for every point and
parameter of models with residual blocks, dropout, in-place ReLUs, a module called twice and a
tuple output; a model that replay does not fit (a parameter read outside its module) must still
be judged right; probes that start with a forward difference keep the verdicts of central ones.
"""
import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import minigrad
from diagnostics import check_gradients
from diagnostics.backends import get_backend
from diagnostics.batch import Batch
from diagnostics.gradcheck.evaluator import Evaluator
from diagnostics.gradcheck.kinks import Tolerance, estimate_slope
from diagnostics.gradcheck.points import Instrument

from .gradcheck_models import FRAMEWORKS, build, one_torch_thread

KINDS = ("mlp", "residual", "cnn", "twice")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


def _replay_versus_full(model, loss_fn, inputs, targets, seed):
    """Max |replayed loss - full loss| over every point and parameter (one random delta each),
    and the number of module calls replayed."""
    backend = get_backend(model)
    call = Batch.prepare(backend, loss_fn, inputs, targets, float64=True)
    rng = np.random.default_rng(seed)
    with backend.preserved():
        copy = backend.clone(dtype=np.float64)
        with Instrument(copy) as instrument:
            evaluator = Evaluator(copy, instrument, call)
            analytic = evaluator.analytic()
            evaluator.check_deterministic(analytic.loss)
            targets = [dict(point=p, delta=1e-3 * rng.standard_normal(p.shape))
                       for p in analytic.points]
            targets += [dict(parameter=name, delta=1e-3 * rng.standard_normal(grad.shape))
                        for name, grad in analytic.parameters.items()]
            worst = 0.0
            for target in targets:
                replayed = evaluator.loss(replay=True, **target)
                full = evaluator.loss(**target)
                again = evaluator.loss(replay=True, **target)   # the store is unchanged
                worst = max(worst, abs(replayed - full), abs(again - full))
            return worst, instrument.replay.calls_replayed


@settings(max_examples=12, deadline=None)
@given(framework=st.sampled_from(FRAMEWORKS), kind=st.sampled_from(KINDS),
       seed=st.integers(0, 10_000))
def test_replayed_runs_give_the_full_runs_loss(framework, kind, seed):
    worst, replayed = _replay_versus_full(*build(framework, kind, seed=seed % 7), seed)
    assert worst <= 1e-13
    assert replayed > 0


def _inplace_dropout_net():
    """In-place ReLUs overwrite the outputs replay hands out; dropout draws from the global
    generator after the replayed calls; a residual block adds its input in place."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)
            self.act = torch.nn.ReLU(inplace=True)

        def forward(self, x):
            out = self.act(self.fc(x))
            out += x
            return out

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(inplace=True), Block(),
                               torch.nn.Dropout(0.3), Block(), torch.nn.Dropout(0.3),
                               torch.nn.Linear(8, 3))


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_replay_survives_in_place_operations_and_dropout(seed):
    rng = np.random.default_rng(seed)
    worst, replayed = _replay_versus_full(_inplace_dropout_net(), torch.nn.CrossEntropyLoss(),
                                          rng.standard_normal((6, 5)), rng.integers(0, 3, 6),
                                          seed)
    assert worst <= 1e-13 and replayed > 0


def test_in_place_dropout_net_passes_the_check():
    rng = np.random.default_rng(0)
    report = check_gradients(_inplace_dropout_net(), torch.nn.CrossEntropyLoss(),
                             rng.standard_normal((6, 5)), rng.integers(0, 3, 6))
    assert report.passed, str(report)


class _ReadsALaterWeight(torch.nn.Module):
    """``first`` uses ``last``'s weight before ``last`` is called: replaying ``first`` while
    ``last.weight`` is perturbed would miss that use."""

    def __init__(self):
        super().__init__()
        self.last = torch.nn.Linear(4, 4)
        self.first = _Scaled(self.last)
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.head(torch.tanh(self.last(self.first(x))))


class _Scaled(torch.nn.Module):
    def __init__(self, other):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(4))
        self.other = [other]      # not a sub-module: its parameters stay "last"'s

    def forward(self, x):
        return x * self.scale + x @ self.other[0].weight.T


def test_a_parameter_read_outside_its_module_is_measured_on_full_runs():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    batch = rng.standard_normal((6, 4)), rng.integers(0, 2, 6)
    worst, _ = _replay_versus_full(_ReadsALaterWeight(), torch.nn.CrossEntropyLoss(), *batch, 0)
    assert worst > 1e-9     # replay alone would measure last.weight wrongly
    report = check_gradients(_ReadsALaterWeight(), torch.nn.CrossEntropyLoss(), *batch)
    assert report.passed, str(report)
    assert report.parameters["last.weight"].status == "ok"


def test_the_copy_keeps_no_forward_wrapper_and_the_user_model_is_untouched():
    model, loss_fn, inputs, targets = build("torch", "residual")
    check_gradients(model, loss_fn, inputs, targets)
    assert all("forward" not in vars(m) for m in model.modules())
    backend = get_backend(model).clone(dtype=np.float64)
    with Instrument(backend):
        assert all("forward" in vars(m) for _, m in backend.named_modules())
    assert all("forward" not in vars(m) for _, m in backend.named_modules())


def test_an_instance_forward_is_put_back():
    """bug_injection swaps a module's forward on the instance; the wrapper must restore it."""
    model = minigrad.nn.Sequential(minigrad.nn.Linear(3, 3), minigrad.nn.Tanh())
    own = model[1].forward
    model[1].forward = own
    backend = get_backend(model)
    with Instrument(backend):
        assert model[1].forward is not own
    assert vars(model[1])["forward"] is own and "forward" not in vars(model[0])


# ------------------------------------------------------------- forward first
TOLERANCE = Tolerance(1e-4, 1e-8)


def _slope(f, analytic, **options):
    calls = []

    def loss_at(t):
        calls.append(t)
        return f(t)

    return estimate_slope(loss_at, f(0.0), step=1e-6, tolerance=TOLERANCE, analytic=analytic,
                          **options), len(calls)


@given(x=st.floats(-2, 2), wrong=st.floats(0.01, 5))
def test_forward_first_keeps_the_verdicts_on_smooth_functions(x, wrong):
    f = lambda t: np.sin(x + t) + 0.5 * (x + t) ** 2
    right = np.cos(x) + x
    slope, runs = _slope(f, right, forward_first=True)
    assert slope.status == "ok" and runs == 1
    bad = right + wrong * max(1, abs(right))
    assert _slope(f, bad, forward_first=True)[0].status == _slope(f, bad)[0].status == "mismatch"


@given(offset=st.floats(0.01, 0.99))
def test_forward_first_sees_the_slope_past_a_kink_behind_the_point(offset):
    """The kink lies behind the point: the forward step never crosses it, and the analytic
    slope is the true one at the point; a wrong one is still a mismatch or a kink."""
    f = lambda t: max(t + offset * 1e-6, 0.0) * 2.0 + t
    assert _slope(f, 3.0, forward_first=True) == (_slope(f, 3.0, forward_first=True)[0], 1)
    assert _slope(f, 3.0, forward_first=True)[0].status == "ok"
    assert _slope(f, 5.0, forward_first=True)[0].status in ("mismatch", "kink")


@pytest.mark.parametrize("analytic", [0.0, 1.0, 0.5, 3.0])
def test_forward_first_at_a_kink_is_never_a_mismatch(analytic):
    relu_sum = lambda t: max(t, 0.0) + max(-2 * t, 0.0) + 0.3 * t
    assert _slope(relu_sum, analytic, forward_first=True)[0].status in ("kink", "ok")


# ------------------------------------------------- a full step back vouches
class _OneTensor:
    """An evaluator of ``loss(t) = base + slope * t + curvature * t**2`` along one element,
    whose replayed runs are off by ``off``; counts the runs of each kind."""

    def __init__(self, base, slope, curvature, off):
        self.base, self.slope, self.curvature, self.off = base, slope, curvature, off
        self.runs = {True: 0, False: 0}

    def loss(self, *, parameter=None, point=None, delta=None, replay=False):
        self.runs[replay] += 1
        t = float(delta.reshape(-1)[0])
        return (self.base + self.slope * t + self.curvature * t * t
                + (self.off if replay else 0.0))


def _prober(evaluator):
    from diagnostics.gradcheck.probing import Prober
    from diagnostics.gradcheck.settings import Settings

    return Prober(evaluator, Settings(), evaluator.base)


@example(base=1.0, slope=0.0, curvature=0.0, rounding_units=4.0, large=False)
@given(base=st.floats(0.1, 10), slope=st.floats(-1e-5, 1e-5) | st.floats(-1, 1),
       curvature=st.floats(-1e-3, 1e-3) | st.floats(-10, 10),
       rounding_units=st.floats(-8, 8) | st.floats(-40, 40), large=st.booleans())
def test_a_replayed_run_that_is_off_never_makes_a_right_gradient_a_mismatch(
        base, slope, curvature, rounding_units, large):
    """Replayed runs off by anything from a few roundings of the loss (where the one-sided
    slopes of a small gradient, one replayed and one full, agree as closely as rounding
    allows, yet their mean misses the gradient) to far more: a right gradient is never
    called wrong, whatever the first measurement without confirm takes."""
    from diagnostics.gradcheck.kinks import ROUNDING
    from diagnostics.gradcheck.probing import Target

    off = rounding_units * ROUNDING * base * (1e6 if large else 1.0)
    evaluator = _OneTensor(base, slope, curvature, off)
    target = Target("w", np.array([slope]), parameter="w")
    measured = _prober(evaluator).slope(target, np.array([1.0]), slope, confirm=False)
    assert measured.status != "mismatch"


@given(base=st.floats(0.1, 10), slope=st.floats(-1, 1), error=st.floats(0.01, 1))
def test_a_wrong_gradient_costs_one_replayed_run_and_one_full_run(base, slope, error):
    """The full step back vouches for the replayed step forward: no third run."""
    from diagnostics.gradcheck.probing import Target

    evaluator = _OneTensor(base, slope, 0.5, 0.0)
    wrong = slope + error * max(1.0, abs(slope))
    target = Target("w", np.array([wrong]), parameter="w")
    measured = _prober(evaluator).slope(target, np.array([1.0]), wrong, confirm=False)
    assert measured.status == "mismatch"
    assert evaluator.runs == {True: 1, False: 1}
