"""Points measured once: a point whose identity is handed, untouched, to one later point only.

Inside a module with its own forward (a residual block's ``conv1 -> bn1 -> relu -> conv2``),
the recording pass watches every use of each point's identity; a point used by nothing but the
next point's hook is an alias of it. A tensor with a second reader (a shortcut, a statistic
taken under no_grad, an in-place change, a hook) keeps both points measured, and the verdicts
are those of a check that measures every point (the rule switched off).
"""
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bug_injection.planted import gradient
from bug_injection.reference.bench import Bench
from diagnostics import check_gradients
from diagnostics.backends import get_backend
from diagnostics.backends.torch_backend import TorchBackend
from diagnostics.batch import Batch
from diagnostics.gradcheck.evaluator import Evaluator
from diagnostics.gradcheck.points import Instrument

from .gradcheck_models import one_torch_thread


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


class Block(torch.nn.Module):
    """A BasicBlock in small: conv1 -> bn1 -> relu -> conv2 -> bn2, plus the input, relu."""

    def __init__(self, channels=3):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.relu1 = torch.nn.Tanh()
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(channels)
        self.relu2 = torch.nn.Tanh()

    def forward(self, x):
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu2(out + x)


class Net(torch.nn.Module):
    def __init__(self, block=None):
        super().__init__()
        torch.manual_seed(0)
        self.block = block or Block()
        self.head = torch.nn.Linear(3 * 4 * 4, 4)

    def forward(self, x):
        return self.head(torch.flatten(self.block(x), 1))


def _batch():
    generator = torch.Generator().manual_seed(1)
    return torch.randn(4, 3, 4, 4, generator=generator), torch.tensor([0, 1, 2, 3])


def _aliases(model):
    """The aliases of one recording pass, as ``{label: label}``."""
    backend = get_backend(model)
    inputs, targets = _batch()
    batch = Batch.prepare(backend, torch.nn.CrossEntropyLoss(), inputs, targets, float64=True)
    with backend.preserved():
        copy = backend.clone(dtype=np.float64)
        with Instrument(copy) as instrument:
            analytic = Evaluator(copy, instrument, batch).analytic()
            labels = {p.key: p.label for p in analytic.points}
            return {labels[k]: labels[v] for k, v in instrument.aliases.items()}


def _check(model, monkeypatch=None, *, watched=True):
    """check_gradients on ``model``; ``watched=False``: every point measured (no recorder)."""
    if not watched:
        monkeypatch.setattr(TorchBackend, "use_recorder", lambda self, on_use: None)
    inputs, targets = _batch()
    try:
        return check_gradients(model, torch.nn.CrossEntropyLoss(), inputs, targets)
    finally:
        if not watched:
            monkeypatch.undo()


def _verdict(report):
    return (report.passed, report.culprits,
            [(c.module, c.path, None if c.pattern is None else c.pattern.kind)
             for c in report.causes],
            [(p.name, p.status) for p in report.points])


def test_points_inside_a_custom_block_are_measured_once():
    aliases = _aliases(Net())
    assert aliases["'block.conv1' output"] == "'block.bn1' input"
    assert aliases["'block.bn1' output"] == "'block.relu1' input"
    assert aliases["'block.relu1' output"] == "'block.conv2' input"
    assert aliases["'block.conv2' output"] == "'block.bn2' input"
    assert aliases["'block.relu2' output"] == "'block' output"
    # x goes to conv1 and to the sum; bn2's output is read by the sum, the block's by flatten
    assert "'block' input" not in aliases
    assert "'block.bn2' output" not in aliases
    assert "'block' output" not in aliases


def test_fewer_evaluations_and_the_same_verdict(monkeypatch):
    watched = _check(Net())
    every = _check(Net(), monkeypatch, watched=False)
    assert _verdict(watched) == _verdict(every)
    assert watched.passed
    assert watched.forward_evaluations < every.forward_evaluations


def _double(x):
    return x * 2


with warnings.catch_warnings():   # torch.jit.script is deprecated, still what users have
    warnings.simplefilter("ignore", DeprecationWarning)
    _scripted_double = torch.jit.script(_double)   # a read that only the graph shows


class TwoReaders(torch.nn.Module):
    """``a``'s output goes to ``b`` and is read once more by ``how``."""

    def __init__(self, how):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 3, 3, padding=1)
        self.b = torch.nn.Tanh()
        self.how = how

    def forward(self, x):
        h = self.a(x)
        if self.how == "sum":
            return self.b(h) + h
        if self.how == "no_grad":
            with torch.no_grad():
                scale = h.pow(2).mean() + 1
            return self.b(h) / scale
        if self.how == "detach":
            return self.b(h) * h.detach().abs().mean()
        if self.how == "scripted":
            return self.b(h) + _scripted_double(h)
        if self.how == "in_place":
            h.mul_(2.0)
            return self.b(h)
        return self.b(h)


@pytest.mark.parametrize("how", ["sum", "no_grad", "detach", "in_place", "scripted"])
def test_a_tensor_with_a_second_reader_keeps_both_points(how):
    assert "'block.a' output" not in _aliases(Net(TwoReaders(how)))


def test_a_single_reader_is_an_alias():
    aliases = _aliases(Net(TwoReaders("plain")))
    assert aliases["'block.a' output"] == "'block.b' input"
    assert aliases["'block.b' output"] == "'block' output"


def test_a_hook_that_reads_the_tensor_keeps_both_points():
    """A global forward pre-hook (the copy keeps no module hooks of the user's) reads every
    module's input, the identity of 'a''s output too."""
    seen = []
    handle = torch.nn.modules.module.register_module_forward_pre_hook(
        lambda module, args: seen.append(sum(float(a.detach().sum()) for a in args
                                             if isinstance(a, torch.Tensor))))
    try:
        aliases = _aliases(Net(TwoReaders("plain")))
    finally:
        handle.remove()
    assert "'block.a' output" not in aliases
    assert seen


def test_a_value_read_under_no_grad_is_still_judged(monkeypatch):
    """The statistic taken under no_grad makes the loss depend on 'a''s output through a path
    backward does not see: its gradient there disagrees with finite differences while 'b''s
    input is right. Measured as an alias it would pass; measured, the block is named."""
    watched = _check(Net(TwoReaders("no_grad")))
    every = _check(Net(TwoReaders("no_grad")), monkeypatch, watched=False)
    assert _verdict(watched) == _verdict(every)
    assert watched.culprits == ["block"]


def test_minigrad_keeps_only_the_sequential_rule():
    import minigrad

    backend = get_backend(minigrad.nn.Sequential(minigrad.nn.Linear(2, 2)))
    assert backend.use_recorder(lambda tensors: None) is None
    assert backend.sole_consumers(None) is None


def test_a_planted_bug_inside_a_block_is_localized(monkeypatch):
    model = Net()
    bench = Bench(setup="block", backend="torch", model=model,
                  loss_fn=torch.nn.CrossEntropyLoss(), optimizer=None, train_x=None,
                  train_y=None, test_x=None, test_y=None, loop=None)
    with gradient.conv_kernel_not_flipped(bench, "block.conv2"):
        watched = _check(model)
        every = _check(model, monkeypatch, watched=False)
    assert watched.culprits == ["block.conv2"]
    assert watched.causes[0].path == "input"
    assert _verdict(watched) == _verdict(every)
    assert watched.forward_evaluations < every.forward_evaluations


STEPS = ("linear", "tanh", "keep", "add_kept", "no_grad_scale", "in_place", "detach_scale",
         "scripted")


class Steps(torch.nn.Module):
    """A forward made of ``steps``: module calls, reuses of a kept tensor, reads under
    no_grad, detached reads and in-place changes, between the module calls."""

    def __init__(self, steps):
        super().__init__()
        torch.manual_seed(0)
        self.steps = steps
        self.layers = torch.nn.ModuleList(
            torch.nn.Linear(4, 4) if step == "linear" else torch.nn.Tanh()
            for step in steps)

    def forward(self, h):
        kept = h
        for step, layer in zip(self.steps, self.layers):
            if step in ("linear", "tanh"):
                h = layer(h)
            elif step == "keep":
                kept = h
            elif step == "add_kept":
                h = layer(h) + kept
            elif step == "no_grad_scale":
                with torch.no_grad():
                    scale = h.pow(2).mean() + 1
                h = layer(h) / scale
            elif step == "scripted":
                h = layer(h) + _scripted_double(h)
            elif step == "detach_scale":
                h = layer(h) * (1 + h.detach().abs().mean())
            else:
                h = h * 1.0
                h.mul_(1.5)
                h = layer(h)
        return h


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(STEPS), min_size=1, max_size=6),
       st.integers(min_value=0, max_value=2 ** 16))
def test_an_alias_moves_the_loss_exactly_as_its_later_point(steps, seed):
    """Whatever the forward does between module calls, a perturbation of a point gives the
    very same loss as the same perturbation of the point it is an alias of."""
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), Steps(steps), torch.nn.Linear(4, 2))
    rng = np.random.default_rng(seed)
    inputs = torch.tensor(rng.standard_normal((5, 3)))
    targets = torch.tensor(rng.integers(0, 2, 5))
    backend = get_backend(model)
    batch = Batch.prepare(backend, torch.nn.CrossEntropyLoss(), inputs, targets, float64=True)
    with backend.preserved():
        copy = backend.clone(dtype=np.float64)
        with Instrument(copy) as instrument:
            evaluator = Evaluator(copy, instrument, batch)
            analytic = evaluator.analytic()
            points = {p.key: p for p in analytic.points}
            for source, later in instrument.aliases.items():
                delta = 1e-3 * rng.standard_normal(points[source].shape)
                assert (evaluator.loss(point=points[source], delta=delta)
                        == evaluator.loss(point=points[later], delta=delta))
                assert np.array_equal(analytic.point_gradients[source],
                                      analytic.point_gradients[later])
