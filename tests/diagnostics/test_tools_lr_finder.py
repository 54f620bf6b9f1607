"""find_lr: a readable sweep, usable suggestions, divergence stops it.

And the state is restored bit for bit.
"""
import csv
import json

import numpy as np
import pytest
import torch

from diagnostics import find_lr
from diagnostics.errors import DiagnosticsError

from .tools_helpers import (FRAMEWORKS, OPTIM, assert_same, capture, classification_data,
                            cross_entropy, mlp, take_steps, tensor)


def _batches(rows=64, size=16):
    x, y = classification_data(rows=rows)
    return [(x[i:i + size], y[i:i + size]) for i in range(0, rows, size)]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_sweep_over_batches_gives_suggestions_inside_the_range(framework):
    model = mlp(framework)
    optimizer = OPTIM[framework].SGD(model.parameters(), lr=0.1, momentum=0.9)
    result = find_lr(model, cross_entropy(framework), _batches(), optimizer=optimizer, steps=60,
                     progress=False)
    assert np.all(np.diff(result.lrs) > 0) and result.lrs[0] == pytest.approx(1e-7)
    assert len(result.lrs) == len(result.losses) == len(result.raw_losses) <= 60
    assert set(result.suggestions) == {"minimum/10", "steepest", "valley"}
    assert result.suggestion == result.suggestions["minimum/10"]
    for lr in result.suggestions.values():
        assert 1e-7 <= lr <= 10.0
    if result.diverged_at is not None:  # advice keeps well clear of divergence
        assert result.suggestion <= result.diverged_at / 5
    assert result.findings == []   # the loss fell: no flat-curve warning
    text = str(result)
    assert "suggestion (minimum/10)" in text and "steepest" in text and "valley" in text
    assert (json.loads(json.dumps(result.to_dict()))["suggestion"]
            == pytest.approx(result.suggestion))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_training_with_the_suggestion_beats_a_tiny_rate_without_diverging(framework):
    x, y = classification_data(rows=64)
    loss_fn = cross_entropy(framework)
    probe = mlp(framework, (8, 16, 3))
    result = find_lr(probe, loss_fn, (x, y), optimizer=OPTIM[framework].SGD(
        probe.parameters(), lr=0.1, momentum=0.9), steps=60, progress=False)

    def final_loss(lr):
        model = mlp(framework, (8, 16, 3))
        optimizer = OPTIM[framework].SGD(model.parameters(), lr=lr, momentum=0.9)
        take_steps(framework, model, optimizer, x, y, steps=40)
        return float(loss_fn(model(tensor(framework, x)), tensor(framework, y)).item())

    suggested, tiny = final_loss(result.suggestion), final_loss(1e-4)
    assert np.isfinite(suggested) and suggested < 0.5 * tiny


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_model_optimizer_and_rng_are_restored_bit_for_bit(framework):
    x, y = classification_data(rows=32)
    model = mlp(framework)
    optimizer = OPTIM[framework].Adam(model.parameters(), lr=1e-3)
    take_steps(framework, model, optimizer, x, y)
    lrs = [group["lr"] for group in optimizer.param_groups]
    before = capture(model, optimizer)
    find_lr(model, cross_entropy(framework), (x, y), optimizer=optimizer, steps=30,
            progress=False)
    assert_same(before, capture(model, optimizer))
    assert [group["lr"] for group in optimizer.param_groups] == lrs


def test_shuffling_dataloader_leaves_the_global_rng_as_it_was():
    x, y = classification_data(rows=64)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=16,
        shuffle=True)
    model = mlp("torch")
    before = capture(model)
    result = find_lr(model, cross_entropy("torch"), loader, steps=12, progress=False)
    assert len(result.lrs) == 12  # the loader was cycled through three times
    assert_same(before, capture(model))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_flat_noisy_curve_is_called_a_guess_and_no_minimum_is_read_in_the_warm_up(framework):
    """Labels independent of the inputs and rates too small to move the weights: the loss only
    wanders with the batches. The lowest smoothed point of such a curve often lies in the first
    steps (an early easy batch, averaged over few losses); a tenth of that rate is no advice."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 8)).astype(np.float32)
    y = rng.integers(0, 3, 256).astype(np.int64)
    batches = [(x[i:i + 8], y[i:i + 8]) for i in range(0, 256, 8)]
    model = mlp(framework)
    result = find_lr(model, cross_entropy(framework), batches, optimizer=OPTIM[framework].SGD(
        model.parameters(), lr=0.1), start_lr=1e-7, end_lr=1e-5, steps=60, progress=False)
    assert [f.code for f in result.findings] == ["LOSS_PLATEAU"]
    assert "did not fall during the sweep" in str(result)
    skip = len(result.losses) // 10
    assert result.suggestion >= result.lrs[skip] / 10 * (1 - 1e-9)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_divergence_stops_the_sweep_and_too_early_is_reported(framework):
    x, y = classification_data(rows=32)
    model = mlp(framework)
    optimizer = OPTIM[framework].SGD(model.parameters(), lr=0.1, momentum=0.9)
    result = find_lr(model, cross_entropy(framework), (x, y), optimizer=optimizer, start_lr=30.0,
                     end_lr=1e4, steps=50, smooth=0.5, progress=False)
    assert result.diverged_at is not None and len(result.lrs) < 50
    assert result.suggestion is None
    assert [f.code for f in result.findings] == ["LOSS_DIVERGING"]
    assert "none (curve too short)" in str(result)


def test_a_one_shot_iterator_ends_the_sweep_when_it_runs_out():
    batches = iter(_batches(rows=64, size=8))  # 8 batches, then nothing
    result = find_lr(mlp("minigrad"), cross_entropy("minigrad"), batches, steps=30,
                     progress=False)
    assert len(result.lrs) == 8


def test_linear_mode_spaces_the_rates_evenly():
    x, y = classification_data(rows=16)
    result = find_lr(mlp("minigrad"), cross_entropy("minigrad"), (x, y), start_lr=1e-3,
                     end_lr=1e-1, steps=11, mode="linear", progress=False)
    np.testing.assert_allclose(np.diff(result.lrs), 0.0099)


def test_csv_and_plot_write_the_curve(tmp_path):
    x, y = classification_data(rows=16)
    result = find_lr(mlp("minigrad"), cross_entropy("minigrad"), (x, y), steps=40,
                     progress=False)
    result.to_csv(tmp_path / "lr.csv")
    with open(tmp_path / "lr.csv") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["lr", "loss", "raw_loss"] and len(rows) == len(result.lrs) + 1
    assert float(rows[5][0]) == pytest.approx(result.lrs[4])
    result.plot(tmp_path / "lr.png")
    assert (tmp_path / "lr.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_progress_goes_to_stderr_only_when_asked(capsys):
    x, y = classification_data(rows=16)
    for progress in (True, False):
        find_lr(mlp("minigrad"), cross_entropy("minigrad"), (x, y), steps=5, progress=progress)
        captured = capsys.readouterr()
        assert captured.out == ""
        assert ("find_lr:" in captured.err and "/5" in captured.err) is progress


def test_auto_progress_stays_quiet_without_a_terminal(capsys):
    x, y = classification_data(rows=16)
    find_lr(mlp("minigrad"), cross_entropy("minigrad"), (x, y), steps=5)   # progress="auto"
    assert capsys.readouterr().err == ""


def test_bad_arguments_raise_naming_the_argument():
    x, y = classification_data(rows=8)
    model, loss = mlp("minigrad"), cross_entropy("minigrad")
    cases = [
        ({"start_lr": 0.0}, "start_lr: expected a finite number > 0"),
        ({"end_lr": 1e-8}, "end_lr: expected a finite number > start_lr"),
        ({"steps": 1}, "steps: expected an integer >= 2"),
        ({"mode": "cosine"}, "mode: expected 'exp' or 'linear'"),
        ({"smooth": 1.0}, r"smooth: expected a number in \[0, 1\)"),
        ({"diverge": 1.0}, "diverge: expected a finite number > 1"),
        ({"progress": "yes"}, "progress: expected True, False or 'auto'"),
    ]
    for kwargs, message in cases:
        with pytest.raises(DiagnosticsError, match=message):
            find_lr(model, loss, (x, y), **kwargs)
    with pytest.raises(DiagnosticsError, match="data: expected an .inputs, targets. pair"):
        find_lr(model, loss, 5)
    with pytest.raises(DiagnosticsError, match="data: expected batches that are"):
        find_lr(model, loss, [x, x, x], progress=False)
    with pytest.raises(DiagnosticsError, match="data: expected at least one batch"):
        find_lr(model, loss, [], progress=False)
    with pytest.raises(DiagnosticsError, match=r"data\[0\] \(inputs\): expected a minigrad"):
        find_lr(model, loss, (x.tolist(), y))


# ------------------------------------------------------------------ a minimum at an edge
def _curve(shape, steps=60):
    lrs = np.geomspace(1e-7, 10.0, steps)
    t = np.linspace(0.0, 1.0, steps)
    losses = {"falls": 2.0 - t, "rises": 1.0 + t ** 2,
              "bottoms": 1.0 + (t - 0.6) ** 2}[shape]
    return list(lrs), list(losses)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_sweep_still_falling_at_its_top_warns_instead_of_advising_its_edge(framework):
    """Rates too small to turn the loss up: one batch's loss falls all the way to end_lr, so
    its lowest point is the last rate tried, and minimum/10 a tenth of end_lr."""
    x, y = classification_data(rows=32)
    model = mlp(framework)
    result = find_lr(model, cross_entropy(framework), (x, y), start_lr=1e-6, end_lr=1e-3,
                     steps=40, progress=False)
    assert result.diverged_at is None
    assert int(np.argmin(result.losses)) == len(result.losses) - 1
    (finding,) = [f for f in result.findings if f.code == "LR_SWEEP_EDGE"]
    assert finding.severity == "warning" and finding.evidence["edge"] == "top"
    assert "the top of the sweep" in finding.message and "not known to be safe" in \
           finding.message
    assert "sweep higher (end_lr=0.01)" in finding.suggestion
    assert "find_lr(model, loss_fn, train_loader)" in finding.suggestion   # one batch given
    assert "(not known to be safe: the lowest loss sits at an end of the sweep" in str(result)


def test_the_edge_readings_of_synthetic_curves():
    from diagnostics.tools.lr_finder import _result

    lrs, losses = _curve("falls")
    (top,) = _result(lrs, losses, losses, None).findings
    assert top.code == "LR_SWEEP_EDGE" and top.evidence["edge"] == "top"
    assert "train_loader" not in top.suggestion           # batches given: no loader advice

    lrs, losses = _curve("falls")          # lowest, then an abrupt blow-up: the usual shape
    assert _result(lrs, losses + [40.0], losses + [40.0], lrs[-1] * 1.1).findings == []

    lrs, losses = _curve("rises")          # the loss only rose, on to diverging
    found = _result(lrs, losses + [40.0], losses + [40.0], 20.0).findings
    (bottom,) = [f for f in found if f.code == "LR_SWEEP_EDGE"]
    assert bottom.evidence["edge"] == "bottom" and "sweep lower (start_lr=1e-09)" in \
           bottom.suggestion

    lrs, losses = _curve("bottoms")        # a minimum inside the range: nothing to say
    assert _result(lrs, losses, losses, None).findings == []
    lrs, losses = _curve("bottoms")        # ... also when the loss diverges after it
    assert _result(lrs, losses + [40.0], losses + [40.0], 20.0).findings == []
