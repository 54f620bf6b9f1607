"""Models whose ``forward()`` is called directly (issue 32): a forward-forward net's layers,
each with its own optimizer. No module hook sees them; the watch finds each layer where its
optimizer steps, watches what needs no hook, and says what is missing (UNSEEN_LAYERS, info)."""
import pytest

torch = pytest.importorskip("torch")

from diagnostics import Monitor  # noqa: E402
from diagnostics.integrations import TrainingWatch  # noqa: E402
from tests.realistic.examples import forward_forward  # noqa: E402


def test_each_forward_forward_layer_is_watched_and_its_missing_statistics_are_said():
    heard = []
    with TrainingWatch(on_finding=lambda label, f: heard.append((label, f))) as watch:
        metrics = forward_forward.main(epochs=60)
    assert metrics["test_after"] > 0.8, metrics
    assert [label for label, _ in watch.watched] == ["layer (Layer, Adam)",
                                                     "layer (Layer, Adam) #2"]
    assert watch.problems == []
    for _, report in watch.reports():
        assert [(f.code, f.severity) for f in report.findings] == [("UNSEEN_LAYERS", "info")]
        assert "forward() is called directly" in report.findings[0].message
        assert report.steps == 59 and report.parameters   # gradients and updates are read
    assert not [f for _, f in heard if f.is_alarm]


def test_forward_forward_layers_that_never_zero_their_gradients_are_named():
    with TrainingWatch() as watch:
        forward_forward.main(epochs=20, zero_grad=False)
    codes = [[f.code for f in report.findings] for _, report in watch.reports()]
    assert len(codes) == 2 and all("STALE_GRADIENTS" in c for c in codes), codes


def _trained(model, call, steps=6):
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(32, 16)
    with Monitor(model, opt, every=1) as monitor:
        for _ in range(steps):
            opt.zero_grad()
            loss = call(model, x).pow(2).mean()
            loss.backward()
            opt.step()
            monitor.step(loss)
    return [(f.code, f.severity) for f in monitor.report().findings]


class Wrapper(torch.nn.Module):
    """Trained through its submodules only, as a Lightning training_step may be."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Tanh())


@pytest.mark.parametrize("call, expected", [
    (lambda m, x: m.forward(x), [("UNSEEN_LAYERS", "info")]),
    (lambda m, x: m(x), []),
])
def test_the_monitor_says_when_the_model_is_never_called(call, expected):
    layer = forward_forward.Layer(16, 8, epochs=1)
    assert _trained(layer, call) == expected


def test_a_model_trained_through_its_called_submodules_is_not_unseen():
    assert _trained(Wrapper(), lambda m, x: m.net(x)) == []
