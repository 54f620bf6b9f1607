"""An optimizer under an LR schedule with a warm-up: the tools train at the schedule's base
(peak) rate, the ``initial_lr`` its scheduler records, not the warm-up's first rate (a few
hundred steps at 1/40 of the rate judged the schedule's start, not the model: OVERFIT_FAILED
"the optimizer settings are slow" on a model that learns). They say which rate they used, a
peak rate too small still fails with that advice, and the optimizer's lr is put back."""
import numpy as np
import pytest
import torch

import minigrad
from diagnostics import overfit_one_batch, preflight

from .tools_helpers import assert_same, capture, classification_data, mlp

WARM_UP = 40
TOTAL = 1000


def linear_warm_up(step):
    return min(1.0, (step + 1) / WARM_UP)


def linear_schedule_with_warmup(step):
    """transformers' get_linear_schedule_with_warmup, written with LambdaLR: 0 -> 1 over the
    warm-up, then linearly down to 0 at TOTAL."""
    if step < WARM_UP:
        return step / max(1, WARM_UP)
    return max(0.0, (TOTAL - step) / max(1, TOTAL - WARM_UP))


def scheduled(lr, schedule, seed):
    x, y = classification_data(rows=32, seed=seed)
    model = mlp("torch", (8, 32, 3), seed=seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    return model, optimizer, scheduler, torch.from_numpy(x), torch.from_numpy(y)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("schedule", [linear_warm_up, linear_schedule_with_warmup])
def test_a_warm_up_schedule_on_a_model_that_learns_passes(schedule, seed):
    model, optimizer, scheduler, x, y = scheduled(3e-3, schedule, seed)
    assert optimizer.param_groups[0]["lr"] < 3e-3 / 10      # the warm-up's first rate
    before, lrs = capture(model, optimizer), [g["lr"] for g in optimizer.param_groups]
    result = overfit_one_batch(model, torch.nn.CrossEntropyLoss(), x, y, optimizer=optimizer)
    assert result.passed and not result.findings
    report = preflight(model, torch.nn.CrossEntropyLoss(), x, y, optimizer=optimizer)
    assert report.item("overfit one batch").status == "PASS"
    assert report.item("training steps").status == "PASS"
    assert "OVERFIT_FAILED" not in [f.code for f in report.findings]
    assert_same(before, capture(model, optimizer))
    assert [g["lr"] for g in optimizer.param_groups] == lrs
    assert scheduler.last_epoch == 0


def test_a_peak_rate_too_small_still_fails_and_names_the_rate_it_used():
    model, optimizer, _, x, y = scheduled(1e-6, linear_warm_up, 0)
    result = overfit_one_batch(model, torch.nn.CrossEntropyLoss(), x, y, optimizer=optimizer)
    assert not result.passed
    (finding,) = result.findings
    assert finding.code == "OVERFIT_FAILED" and finding.severity == "error"
    assert "a learning rate of 1e-06 may be too small" in finding.message
    assert "the LR scheduler's base rates (initial_lr), which these steps trained at, not " \
           "the 2.5e-08 it sets now" in finding.message
    assert finding.evidence["learning_rates"] == [1e-6]

    (warning,) = preflight(model, torch.nn.CrossEntropyLoss(), x, y,
                           optimizer=optimizer).item("overfit one batch").findings
    assert warning.severity == "warning" and "(AdamW, lr 1e-06)" in warning.message
    assert "the optimizer settings are slow; the learning rates quoted are the LR " \
           "scheduler's base rates" in warning.message


def test_a_broken_model_under_a_warm_up_still_fails_as_an_error():
    model, optimizer, _, x, y = scheduled(3e-3, linear_warm_up, 0)
    with torch.no_grad():
        model[0].bias.fill_(-50.0)          # every hidden ReLU dead: nothing upstream learns
    item = preflight(model, torch.nn.CrossEntropyLoss(), x, y,
                     optimizer=optimizer).item("overfit one batch")
    assert item.status == "FAIL"
    assert [(f.code, f.severity) for f in item.findings] == [("OVERFIT_FAILED", "error")]


def test_without_a_scheduler_nothing_is_said_about_one():
    model, optimizer, _, x, y = scheduled(1e-6, linear_warm_up, 0)
    for group in optimizer.param_groups:
        del group["initial_lr"]
    (finding,) = overfit_one_batch(model, torch.nn.CrossEntropyLoss(), x, y,
                                   optimizer=optimizer).findings
    assert "a learning rate of 2.5e-08 may be too small" in finding.message
    assert "scheduler" not in finding.message


def test_a_minigrad_schedule_that_records_initial_lr_is_read_the_same_way():
    """minigrad has no schedulers; one written by hand that keeps torch's convention (the
    base rate in each group's initial_lr) gets the same treatment."""
    x, y = classification_data(rows=32)
    model = mlp("minigrad", (8, 32, 3))
    optimizer = minigrad.optim.Adam(model.parameters(), lr=3e-3)
    for group in optimizer.param_groups:
        group["initial_lr"], group["lr"] = group["lr"], group["lr"] / WARM_UP
    before = capture(model, optimizer)
    result = overfit_one_batch(model, minigrad.nn.CrossEntropyLoss(), x, y, optimizer=optimizer)
    assert result.passed and not result.findings
    assert_same(before, capture(model, optimizer))
    assert np.isclose(optimizer.param_groups[0]["lr"], 3e-3 / WARM_UP)
