"""The Monitor never raises into the training loop: layers whose weight rows are not output
units get no per-unit check, and a probe or check that raises is turned off and quoted."""
import numpy as np
import pytest
import torch

from diagnostics import Monitor
from diagnostics.errors import DiagnosticsError
from diagnostics.monitor.checks import gradients as gradient_checks
from diagnostics.monitor.probes.gradients import GradientsProbe
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class InOutLinear(torch.nn.Module):
    """A linear layer that stores its weight as (in, out), as transformers' ``Conv1D``."""

    def __init__(self, fan_in, fan_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(fan_in, fan_out) * 0.1)
        self.bias = torch.nn.Parameter(torch.zeros(fan_out))

    def forward(self, x):
        return x @ self.weight + self.bias


def _train(model, inputs, loss_of, *, steps=12, every=1):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with Monitor(model, optimizer, every=every) as monitor:
        for _ in range(steps):
            optimizer.zero_grad()
            loss = loss_of(model, inputs)
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    return monitor


def _cross_entropy(model, batch):
    x, y = batch
    return torch.nn.functional.cross_entropy(model(x), y)


def test_a_weight_stored_in_out_is_not_read_as_output_units():
    torch.manual_seed(0)
    model = torch.nn.Sequential(InOutLinear(8, 24), torch.nn.ReLU(), InOutLinear(24, 3))
    batch = (torch.randn(32, 8), torch.randint(0, 3, (32,)))
    monitor = _train(model, batch, _cross_entropy)
    assert monitor._layout.unit_weights == []
    assert not [f for f in monitor.report().findings if f.code == "MONITOR_ERROR"]


def test_a_linear_layers_rows_stay_output_units():
    model = torch.nn.Sequential(torch.nn.Linear(8, 24), torch.nn.ReLU(),
                                torch.nn.Linear(24, 3, bias=False))
    batch = (torch.randn(32, 8), torch.randint(0, 3, (32,)))
    monitor = _train(model, batch, _cross_entropy, steps=2)
    assert monitor._layout.unit_weights == ["0.weight", "2.weight"]


def test_tiny_gpt2_trains_under_the_monitor_without_an_error():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=50,
                                     n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    tokens = torch.randint(0, 50, (4, 16))
    monitor = _train(model, tokens, lambda m, x: m(x, labels=x).loss, steps=6)
    report = monitor.report()
    assert not [f for f in report.findings if f.code == "MONITOR_ERROR"]
    assert all(not name.endswith(("c_attn.weight", "c_fc.weight", "c_proj.weight"))
               for name in monitor._layout.unit_weights)
    assert report.history.steps == 6


def test_a_probe_that_raises_is_turned_off_and_quoted(monkeypatch):
    def broken(self, sample):
        raise ValueError("operands could not be broadcast together")
    monkeypatch.setattr(GradientsProbe, "finish", broken)
    alerts = []
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    batch = (torch.randn(32, 8), torch.randint(0, 3, (32,)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    hooks_before = len(model[0].weight._backward_hooks or {})
    with Monitor(model, optimizer, every=1, on_finding=alerts.append) as monitor:
        for _ in range(5):
            optimizer.zero_grad()
            loss = _cross_entropy(model, batch)
            loss.backward()
            optimizer.step()
            monitor.step(loss)
        disabled = not any(isinstance(p, GradientsProbe) for p in monitor._probes)
    errors = [a for a in alerts if a.code == "MONITOR_ERROR"]
    assert disabled and len(errors) == 1
    assert errors[0].severity == "info"
    assert "GradientsProbe (finish)" in errors[0].message and "broadcast" in errors[0].message
    assert monitor.report().history.steps == 5                 # the other signals went on
    assert len(model[0].weight._backward_hooks or {}) == hooks_before


def test_a_check_that_raises_is_turned_off_and_quoted(monkeypatch):
    calls = []

    def broken(view):
        calls.append(view.step)
        raise KeyError("no such layer")
    monkeypatch.setattr(gradient_checks, "vanishing_gradients", broken)
    from diagnostics.monitor import checks
    monkeypatch.setattr(checks, "CHECKS", (broken,) + checks.CHECKS[1:])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    batch = (torch.randn(32, 8), torch.randint(0, 3, (32,)))
    monitor = _train(model, batch, _cross_entropy, steps=3)
    report = monitor.report()
    assert len(calls) == 1                                     # never called again
    errors = [f for f in report.findings if f.code == "MONITOR_ERROR"]
    assert len(errors) == 1 and "broken" in errors[0].message and "KeyError" in errors[0].message


def test_a_bad_loss_still_raises_a_diagnostics_error():
    model = torch.nn.Linear(4, 2)
    with Monitor(model) as monitor:
        with pytest.raises(DiagnosticsError, match="loss"):
            monitor.step(np.array([1.0, 2.0]).tolist())
