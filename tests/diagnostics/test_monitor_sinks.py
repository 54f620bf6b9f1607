"""Sinks (CSV, JSON lines, TensorBoard read back from its event file, W&B offline) and plots."""
import csv
import json
import math
import sys

import numpy as np
import pytest

from diagnostics import DiagnosticsError, Monitor
from diagnostics.monitor import CSVSink, JSONLSink, TensorBoardSink, WandbSink
from tests.diagnostics.monitor_nets import (FEATURES, batches, frameworks, mlp, teacher_data,
                                            train)
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TORCH, MINIGRAD = frameworks()


def monitored_run(fw, sinks, *, steps=12, every=3):
    fw.seed(0)
    return train(fw, mlp(fw, [FEATURES, 16, 4]), steps=steps,
                 monitor_options={"every": every, "sinks": sinks})


@pytest.mark.parametrize("fw", [TORCH, MINIGRAD], ids=lambda fw: fw.name)
def test_csv_and_jsonl_hold_one_row_per_sampled_step(fw, tmp_path):
    report = monitored_run(fw, [CSVSink(tmp_path / "m.csv"), JSONLSink(tmp_path / "m.jsonl")])
    with open(tmp_path / "m.csv", newline="") as file:
        rows = list(csv.reader(file))
    header, body = rows[0], rows[1:]
    assert header == list(report.history.columns)
    assert [int(row[0]) for row in body] == [0, 1, 3, 6, 9]
    table = report.history.table()
    for written, kept in zip(body, table):
        for cell, value in zip(written, kept):
            assert (cell == "" and not math.isfinite(value)) or float(cell) == value
    records = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [list(record) for record in records] == [header] * 5
    assert [record["step"] for record in records] == [0, 1, 3, 6, 9]
    assert records[0]["update/0.weight/ratio"] is None        # not measured yet at step 0
    assert records[-1]["loss"] == pytest.approx(report.history.losses[9])


def test_tensorboard_event_file_holds_scalars_and_histograms(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monitored_run(TORCH, [TensorBoardSink(tmp_path)])
    events = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0, "histograms": 0})
    events.Reload()
    tags = events.Tags()
    assert {"loss", "gradient_norm", "activation/1/mean", "gradient/0.weight/norm",
            "update/2.bias/ratio"} <= set(tags["scalars"])
    assert [e.step for e in events.Scalars("loss")] == [0, 1, 3, 6, 9]
    assert {"weight/0.weight", "gradient/0.weight"} <= set(tags["histograms"])
    histogram = events.Histograms("weight/2.weight")[-1].histogram_value
    assert histogram.num == 4 * 16


def test_tensorboard_without_torch_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(DiagnosticsError, match=r"pip install 'gradhunt\[tensorboard\]'"):
        TensorBoardSink("runs")


def test_wandb_offline_run_receives_the_rows(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    sink = WandbSink(project="gradhunt-tests", mode="offline", dir=str(tmp_path),
                     settings=wandb.Settings(silent=True))
    report = monitored_run(MINIGRAD, [sink])
    assert sink.run is None                                  # finished by Monitor.close()
    files = list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 1 and files[0].stat().st_size > 0
    own = wandb.init(project="gradhunt-tests", mode="offline", dir=str(tmp_path))
    try:
        mine = WandbSink(own)
        monitored_run(MINIGRAD, [mine])
        assert own.summary["loss"] == pytest.approx(report.history.losses[9])
        assert own.summary["_step"] == 9
    finally:
        own.finish()


def test_wandb_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(DiagnosticsError, match=r"pip install 'gradhunt\[wandb\]'"):
        WandbSink(project="x")


def test_sink_paths_are_checked_before_training(tmp_path):
    with pytest.raises(DiagnosticsError, match="CSVSink"):
        CSVSink(tmp_path / "missing" / "m.csv")
    with pytest.raises(DiagnosticsError, match="JSONLSink"):
        JSONLSink(42)


def test_sinks_are_closed_with_the_monitor(tmp_path):
    sink = CSVSink(tmp_path / "m.csv")
    with Monitor(mlp(MINIGRAD, [FEATURES, 4]), sinks=[sink]) as monitor:
        monitor.step(1.0)
    assert sink._file is None


def test_plots_are_pngs(tmp_path):
    report = monitored_run(TORCH, [], steps=40, every=2)
    paths = report.plot(tmp_path)
    assert [p.name for p in paths] == ["loss.png", "gradient_flow.png", "activations.png"]
    for path in paths:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_plots_without_matplotlib_are_a_clear_error(tmp_path, monkeypatch):
    report = monitored_run(MINIGRAD, [], steps=4, every=1)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(DiagnosticsError, match=r"pip install 'gradhunt\[plot\]'"):
        report.plot(tmp_path)
    with pytest.raises(DiagnosticsError, match="directory"):
        report.plot(tmp_path / "missing")


def test_loss_curve_marks_the_first_nan(tmp_path):
    model = mlp(MINIGRAD, [FEATURES, 4])
    with Monitor(model, every=1) as monitor:
        for value in [1.0, 0.9, 0.8, float("nan"), float("nan")] + [0.5] * 10:
            monitor.step(value)
    paths = monitor.report().plot(tmp_path)
    assert paths[0].stat().st_size > 10_000
    assert np.isnan(monitor.history.losses[3])


def test_a_sink_that_fails_to_open_closes_the_others_and_leaves_no_hook(tmp_path):
    class Broken(CSVSink):
        def open(self, columns):
            raise OSError("disk full")

    model = mlp(MINIGRAD, [FEATURES, 4])
    first = CSVSink(tmp_path / "a.csv")
    with pytest.raises(OSError, match="disk full"):
        Monitor(model, sinks=[first, Broken(tmp_path / "b.csv")])
    assert first._file is None
    assert not model._forward_pre_hooks and not model._forward_hooks


@pytest.mark.parametrize("fw", [TORCH, MINIGRAD], ids=lambda fw: fw.name)
def test_rows_log_the_learning_rate_a_schedule_set(fw, tmp_path):
    fw.seed(0)
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    x, y = teacher_data(0)
    with Monitor(model, optimizer, every=3, sinks=[CSVSink(tmp_path / "m.csv")]) as monitor:
        for step, (xb, yb) in enumerate(batches(x, y, steps=10)):
            optimizer.param_groups[0]["lr"] = 0.1 / (step + 1)     # a schedule
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    history = monitor.report().history
    assert history.columns[:4] == ("step", "loss", "gradient_norm", "lr")
    np.testing.assert_allclose(history.column("lr"), [0.1 / (s + 1) for s in (0, 1, 3, 6, 9)])
    with open(tmp_path / "m.csv", newline="") as file:
        assert next(csv.reader(file))[3] == "lr"


def test_without_an_optimizer_there_is_no_lr_column():
    fw = MINIGRAD
    model = mlp(fw, [FEATURES, 4])
    with Monitor(model) as monitor:
        monitor.step(1.0)
    assert "lr" not in monitor.report().history.columns
