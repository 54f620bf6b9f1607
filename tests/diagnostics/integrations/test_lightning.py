"""``GradhuntCallback`` on real Lightning fits of a tiny module (CPU, no download)."""
import csv
import logging
import warnings

import pytest

torch = pytest.importorskip("torch")
pl = pytest.importorskip("lightning.pytorch")

from diagnostics import DiagnosticsError  # noqa: E402
from diagnostics.integrations import GradhuntCallback  # noqa: E402

HEALTHY_LR = 0.05


class Classifier(pl.LightningModule):
    def __init__(self, lr, fail_at=None):
        super().__init__()
        self.lr, self.fail_at = lr, fail_at
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        if batch_idx == self.fail_at:
            raise RuntimeError("broken batch")
        x, y = batch
        return torch.nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


@pytest.fixture(autouse=True)
def _quiet_lightning():
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _batches():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 16, generator=g)
    y = (x @ torch.randn(16, 4, generator=g)).argmax(1)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32,
                                       shuffle=True, generator=g)


def _fit(module, callback, **trainer_options):
    torch.manual_seed(0)
    options = dict(max_steps=60, accelerator="cpu", logger=False, enable_progress_bar=False,
                   enable_checkpointing=False, enable_model_summary=False, callbacks=[callback])
    trainer = pl.Trainer(**{**options, **trainer_options})
    trainer.fit(module, _batches())
    return trainer


def _hooks_left(module):
    return [name for name, m in module.named_modules()
            if m._forward_hooks or m._forward_pre_hooks or m._backward_hooks]


def test_a_healthy_fit_with_accumulation_clipping_and_bf16_autocast_has_no_finding(capsys):
    module, callback = Classifier(HEALTHY_LR), GradhuntCallback(every=5)
    _fit(module, callback, accumulate_grad_batches=2, gradient_clip_val=1.0,
         precision="bf16-mixed")
    report = callback.report
    assert report.steps == 60                      # one iteration per optimizer step
    assert report.loss["first"] == pytest.approx(1.39, abs=0.1)   # not halved by accumulation
    assert report.findings == []
    assert "no findings: nothing looked wrong in 60 steps" in capsys.readouterr().out
    assert _hooks_left(module) == []


class ListedLayers(Classifier):
    """Its hidden layer kept in a plain Python list: the optimizer never sees it."""

    def __init__(self, lr):
        super().__init__(lr)
        self.layers = [torch.nn.Linear(16, 16)]

    def forward(self, x):
        return self.net(torch.relu(self.layers[0](x)))


class Regression(Classifier):
    """Four outputs fitted by squared error: no class count to read off them."""

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self(x), torch.nn.functional.one_hot(y, 4).float())


def test_the_loss_backward_ran_on_feeds_the_graph_signals():
    """Layers in a plain list are found from the loss's graph (the loss training_step returns
    reaches the callback detached; on_before_backward has it whole), with accumulation too."""
    module, callback = ListedLayers(HEALTHY_LR), GradhuntCallback(every=5, print_report=False)
    _fit(module, callback, accumulate_grad_batches=2)
    found = [f for f in callback.report.findings if f.code == "UNREGISTERED_PARAMETERS"]
    assert len(found) == 1 and found[0].severity == "warning"
    assert "(16x16, 16)" in found[0].message
    assert _hooks_left(module) == []


def test_a_regression_has_no_class_count_through_lightning():
    """From the graph the Monitor sees that the loss scores no classes: the output's width is
    not read as a class count (it was, from the detached loss)."""
    module, callback = Regression(HEALTHY_LR), GradhuntCallback(every=5, print_report=False)
    _fit(module, callback)
    assert "classes" not in callback.report.loss
    classifier, plain = Classifier(HEALTHY_LR), GradhuntCallback(every=5, print_report=False)
    _fit(classifier, plain)
    assert plain.report.loss["classes"] == 4


def test_a_learning_rate_100x_too_high_is_found_and_logged(tmp_path):
    module, callback = Classifier(HEALTHY_LR * 100), GradhuntCallback(every=5,
                                                                      print_report=False)
    logger = pl.loggers.CSVLogger(tmp_path, name="run", version=0)
    _fit(module, callback, logger=logger)
    codes = {f.code: f.severity for f in callback.report.findings}
    assert codes["LOSS_DIVERGING"] == "error"
    with open(tmp_path / "run" / "version_0" / "metrics.csv") as file:
        logged = [row for row in csv.DictReader(file) if row.get("gradhunt/LOSS_DIVERGING")]
    assert logged and float(logged[0]["gradhunt/LOSS_DIVERGING"]) == 3.0   # 3 = error
    assert _hooks_left(module) == []


def test_the_monitor_is_closed_when_training_raises():
    module, callback = Classifier(HEALTHY_LR, fail_at=6), GradhuntCallback(every=2)
    with pytest.raises(RuntimeError, match="broken batch"):
        _fit(module, callback)
    assert _hooks_left(module) == []
    assert callback.report.steps == 6


@pytest.mark.parametrize("options, argument", [({"every": 0}, "every"),
                                               ({"print_report": "yes"}, "print_report")])
def test_bad_arguments_are_refused_when_the_callback_is_built(options, argument):
    with pytest.raises(DiagnosticsError, match=argument):
        GradhuntCallback(**options)


def test_an_error_inside_the_monitor_never_stops_the_fit(monkeypatch, capsys):
    from diagnostics.monitor import Monitor

    step, calls = Monitor.step, []

    def failing_step(monitor, loss):
        calls.append(loss)
        if len(calls) == 11:
            raise ValueError("a probe broke")
        return step(monitor, loss)

    monkeypatch.setattr(Monitor, "step", failing_step)
    module, callback = Classifier(HEALTHY_LR), GradhuntCallback(every=2)
    trainer = _fit(module, callback)
    assert trainer.global_step == 60 and _hooks_left(module) == []
    assert callback.failure == "gradhunt stopped watching at step 10: ValueError: a probe broke"
    assert len(calls) == 11                  # not called again once it failed
    assert callback.report.steps == 10
    assert callback.failure in capsys.readouterr().out


class PoisonedBatch(Classifier):
    """One training batch carries a NaN input: without a guard, its step spreads NaN into every
    weight for the rest of the fit."""

    def training_step(self, batch, batch_idx):
        x, y = batch
        if self.global_step == 10:
            x = x.clone()
            x[3, 5] = float("nan")
        return torch.nn.functional.cross_entropy(self(x), y)


@pytest.mark.parametrize("guard", [None, "skip"])
def test_the_guard_skips_a_poisoned_step_in_a_real_fit(guard):
    """Lightning steps its optimizer with a closure: the guard judges the step at the closure's
    first evaluation and keeps the NaN gradients from being applied."""
    module, callback = PoisonedBatch(HEALTHY_LR), GradhuntCallback(every=5, guard=guard,
                                                                   print_report=False)
    _fit(module, callback, max_steps=30)
    finite = all(bool(torch.isfinite(p).all()) for p in module.parameters())
    codes = [f.code for f in callback.report.findings]
    assert callback.failure is None
    if guard is None:
        assert not finite                           # the harm is real
        assert "STEPS_SKIPPED" not in codes
    else:
        assert finite
        skipped = next(f for f in callback.report.findings if f.code == "STEPS_SKIPPED")
        assert "10" in skipped.message
        assert "DATA_NONFINITE" in codes
    assert _hooks_left(module) == []
