"""PROBABILITIES_AS_LOGITS read from the loss's autograd graph: a sigmoid fed to BCE with logits
(or a softmax to cross-entropy's log-softmax) through reshapes and casts only is named with the
node chain and the module, on torch and minigrad; any op that changes values in between, a
sigmoid fed to nn.BCELoss and the fixed twins stay quiet."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import minigrad
from diagnostics import Monitor
from diagnostics.backends import get_backend
from diagnostics.monitor.checks.probabilities import bce_with_logits_floor
from diagnostics.monitor.kernels import kernels_for
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)
from tests.support.hooks import hook_state

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _data(rows=64, features=8, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, features)).astype(np.float32)
    y = (x[:, :2].sum(1) > 0).astype(np.float32)[:, None]
    return x, y


def _binary(nn, *, sigmoid):
    layers = [nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)]
    return nn.Sequential(*layers, nn.Sigmoid()) if sigmoid else nn.Sequential(*layers)


def _found(lib, model, loss_fn, *, steps=12, every=1, as_number=False, autocast=False):
    x, y = _data()
    opt = lib.optim.Adam(model.parameters(), lr=3e-3)
    with Monitor(model, opt, every=every) as monitor:
        for step in range(steps):
            rows = slice(16 * (step % 4), 16 * (step % 4 + 1))
            xb, yb = lib.tensor(x[rows]), lib.tensor(y[rows])
            opt.zero_grad()
            if autocast:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = loss_fn(model(xb), yb)
            else:
                loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            monitor.step(loss.item() if as_number else loss)
        findings = monitor.report().findings
    return [f for f in findings if f.code == "PROBABILITIES_AS_LOGITS"]


@pytest.mark.parametrize("lib", [torch, minigrad], ids=["torch", "minigrad"])
def test_a_sigmoid_module_before_bce_with_logits_is_named(lib):
    lib.manual_seed(0)
    found = _found(lib, _binary(lib.nn, sigmoid=True), lib.nn.BCEWithLogitsLoss())
    assert [(f.severity, f.location) for f in found] == [("error", "3")]
    chain = {torch: ["BinaryCrossEntropyWithLogitsBackward0", "SigmoidBackward0"],
             minigrad: ["BCEWithLogitsBackward", "SigmoidBackward"]}[lib]
    evidence = found[0].evidence
    assert evidence["graph_chain"] == chain and evidence["module"] == "3"
    assert evidence["floor_positive"] == pytest.approx(np.log1p(np.exp(-1)))
    assert bce_with_logits_floor(0) == pytest.approx(np.log(2))
    # the floor is what BCE with logits gives at the best logit a probability can be
    best = torch.nn.functional.binary_cross_entropy_with_logits(
        torch.tensor([1.0, 0.0]), torch.tensor([1.0, 0.0]), reduction="none")
    assert best.tolist() == pytest.approx([bce_with_logits_floor(1), bce_with_logits_floor(0)])
    assert " <- ".join(chain) in found[0].message and "applied twice" in found[0].message
    assert "remove the sigmoid" in found[0].suggestion


@pytest.mark.parametrize("lib", [torch, minigrad], ids=["torch", "minigrad"])
def test_the_fixed_twin_is_quiet(lib):
    lib.manual_seed(0)
    assert _found(lib, _binary(lib.nn, sigmoid=False), lib.nn.BCEWithLogitsLoss()) == []


def test_a_functional_sigmoid_through_a_squeeze_and_autocast_is_found():
    torch.manual_seed(0)
    model = _binary(torch.nn, sigmoid=False)
    F = torch.nn.functional

    def loss_fn(out, y):
        return F.binary_cross_entropy_with_logits(torch.sigmoid(out).squeeze(1), y[:, 0])
    found = _found(torch, model, loss_fn)
    assert found and found[0].location is None
    assert found[0].evidence["graph_chain"] == [
        "BinaryCrossEntropyWithLogitsBackward0", "SqueezeBackward1", "SigmoidBackward0"]
    assert "a functional call" in found[0].message
    torch.manual_seed(0)
    found = _found(torch, _binary(torch.nn, sigmoid=True), torch.nn.BCEWithLogitsLoss(),
                   autocast=True)
    assert found and "ToCopyBackward0" in found[0].evidence["graph_chain"]


def test_a_softmax_into_label_smoothed_cross_entropy_is_found():
    """Soft targets and label smoothing hide the values' signature; the graph still shows."""
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3), nn.Softmax(dim=1))
    ce = nn.CrossEntropyLoss(label_smoothing=0.1)
    found = _found(torch, model, lambda out, y: ce(out, y[:, 0].long()))
    assert found and found[0].location == "3"
    assert found[0].evidence["graph_chain"][-2:] == ["LogSoftmaxBackward0", "SoftmaxBackward0"]


def test_legitimate_sigmoids_stay_quiet():
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    # a sigmoid output with the loss that expects probabilities
    assert _found(torch, _binary(nn, sigmoid=True), nn.BCELoss()) == []

    class Gated(nn.Module):
        """A sigmoid gate inside the model; the loss gets logits."""

        def __init__(self):
            super().__init__()
            self.body, self.gate = _binary(nn, sigmoid=False), nn.Linear(8, 1)

        def forward(self, x):
            return self.body(x) * torch.sigmoid(self.gate(x)) * 4
    assert _found(torch, Gated(), nn.BCEWithLogitsLoss()) == []
    # a temperature on the probabilities makes them logits of another scale: not flagged
    torch.manual_seed(0)
    assert _found(torch, _binary(nn, sigmoid=True),
                  lambda p, y: F.binary_cross_entropy_with_logits(p * 10 - 5, y)) == []


def test_without_the_loss_tensor_the_sigmoid_is_not_guessed():
    """A loss passed as a number has no graph; sigmoid outputs are plausible logits."""
    torch.manual_seed(0)
    assert _found(torch, _binary(torch.nn, sigmoid=True), torch.nn.BCEWithLogitsLoss(),
                  as_number=True) == []


def test_no_hook_is_left_on_the_sigmoid_module():
    torch.manual_seed(0)
    model = _binary(torch.nn, sigmoid=True)
    before = hook_state(model)
    _found(torch, model, torch.nn.BCEWithLogitsLoss(), steps=3)
    assert hook_state(model) == before


_KEEPS = {"view": lambda t: t.view(-1), "reshape": lambda t: t.reshape(t.shape[0], -1),
          "squeeze": lambda t: t.squeeze(-1), "unsqueeze": lambda t: t.unsqueeze(0),
          "transpose": lambda t: t.transpose(0, -1), "slice": lambda t: t[:, :1],
          "clone": lambda t: t.clone(),
          "cast": lambda t: t.to(torch.float32 if t.dtype == torch.float64 else torch.float64),
          "expand": lambda t: t.expand(2, *t.shape)}
_CHANGES = {"scale": lambda t: t * 3, "shift": lambda t: t - 0.5, "log": torch.log,
            "exp": torch.exp, "tanh": torch.tanh, "abs": torch.abs}


@settings(max_examples=40, deadline=None)
@given(keeps=st.lists(st.sampled_from(sorted(_KEEPS)), max_size=4),
       change=st.one_of(st.none(), st.sampled_from(sorted(_CHANGES))),
       where=st.integers(0, 4), seed=st.integers(0, 2**31 - 1))
def test_the_chain_is_found_exactly_when_only_value_preserving_ops_lie_between(
        keeps, change, where, seed):
    """Reshapes and casts between the sigmoid and BCE with logits keep it found; one op that
    changes values anywhere between makes it not a double sigmoid."""
    generator = torch.Generator().manual_seed(seed)
    z = torch.randn(4, 1, generator=generator, requires_grad=True)
    ops = [_KEEPS[name] for name in keeps]
    if change is not None:
        ops.insert(min(where, len(ops)), _CHANGES[change])
    h = sigmoid = torch.sigmoid(z)
    for op in ops:
        h = op(h)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(h, torch.ones_like(h))
    found = kernels_for(get_backend(torch.nn.Linear(1, 1))).squashed_twice(loss)
    assert len(found) == (change is None)
    if found:
        chain, op, node = found[0]
        assert op == "Sigmoid" and chain[-1] == "SigmoidBackward0"
        assert node is sigmoid.grad_fn and len(chain) == 2 + len(keeps)
