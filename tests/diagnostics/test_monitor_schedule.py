"""LR_SCHEDULE_TOO_FAST: a per-epoch schedule stepped per batch, on the bug, its fixed twin,
and healthy whole-run schedules (cosine to 0, OneCycle, warm-up, a short run's decay)."""
import math
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics import Monitor
from diagnostics.monitor.checks.schedule import schedule_too_fast
from diagnostics.monitor.probes.schedule import ScheduleProbe
from tests.diagnostics.monitor_nets import (FEATURES, batches, frameworks, mlp,
                                            one_torch_thread, teacher_data)  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _findings(lrs, losses=None):
    """Drive the probe with a learning rate per step and run the check on what it saw."""
    import numpy as np
    optimizer = SimpleNamespace(param_groups=[{"lr": lrs[0]}])
    ctx = SimpleNamespace(optimizer=optimizer, step=0)
    probe = ScheduleProbe(ctx)
    for step, lr in enumerate(lrs):
        ctx.step = step
        optimizer.param_groups[0]["lr"] = lr
        probe.on_step(1.0)
    published = {type(value): value for value in probe.signals()}
    view = SimpleNamespace(signal=published.get,
                           losses=np.asarray(losses if losses is not None
                                             else [1.0] * len(lrs)))
    return schedule_too_fast(view)


def test_a_step_schedule_stepped_per_batch_is_named_with_its_numbers():
    lrs = [0.05 * 0.5 ** (step // 2) for step in range(40)]      # StepLR(2, 0.5) per batch
    findings = _findings(lrs)
    assert [f.code for f in findings] == ["LR_SCHEDULE_TOO_FAST"]
    message = findings[0].message
    assert "from 0.05 to 9.54e-08 in 38 steps" in message
    assert "scheduler.step() called every batch with per-epoch settings" in message
    assert findings[0].evidence["collapse_step"] == 20


def test_its_fixed_twin_stepped_per_epoch_is_quiet():
    assert _findings([0.05 * 0.5 ** (step // 16) for step in range(400)]) == []


def test_a_cosine_cycle_per_batch_is_named():
    t_max = 10          # epochs, stepped per batch: a cycle every 20 batches
    lrs = [0.1 * 0.5 * (1 + math.cos(math.pi * step / t_max)) for step in range(60)]
    findings = _findings(lrs)
    assert [f.code for f in findings] == ["LR_SCHEDULE_TOO_FAST"]
    assert findings[0].evidence["cycled"] and "full cycle" in findings[0].message


@pytest.mark.parametrize("steps", [40, 150, 1000])
def test_cosine_over_the_whole_run_is_quiet(steps):
    assert _findings([0.1 * 0.5 * (1 + math.cos(math.pi * s / steps))
                      for s in range(steps + 1)]) == []


def test_onecycle_and_warm_up_are_quiet():
    import torch
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=150,
                                                    pct_start=0.3)
    lrs = []
    for _ in range(150):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert _findings(lrs) == []
    warm_up = [1e-3 * min(1.0, (s + 1) / 100) / math.sqrt(max(s + 1, 100)) for s in range(400)]
    assert _findings(warm_up) == []


@settings(max_examples=60, deadline=None)
@given(steps=st.integers(60, 2000), floor=st.sampled_from([0.0, 1e-6, 1e-4]),
       shape=st.sampled_from(["cosine", "linear", "exponential"]),
       warmup=st.integers(0, 50))
def test_a_schedule_over_the_whole_run_never_alarms(steps, floor, shape, warmup):
    """Warm-up, then a decay to ``floor`` that takes the whole run (at least 60 steps)."""
    def lr(step):
        if step < warmup:
            return 0.1 * (step + 1) / warmup
        t = (step - warmup) / max(1, steps - warmup)
        if shape == "cosine":
            return floor + (0.1 - floor) * 0.5 * (1 + math.cos(math.pi * t))
        if shape == "linear":
            return floor + (0.1 - floor) * (1 - t)
        return 0.1 * (1e-4 ** t)
    assert _findings([lr(s) for s in range(steps + 1)]) == []


@pytest.mark.parametrize("fw", frameworks(), ids=lambda fw: fw.name)
@pytest.mark.parametrize("per_batch", [True, False], ids=["per_batch", "per_epoch"])
def test_the_monitor_reads_the_learning_rate_every_step(fw, per_batch):
    fw.seed(0)
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.05)
    with Monitor(model, optimizer) as monitor:     # sampled every 50: the lr is read anyway
        for step, (xb, yb) in enumerate(batches(x, y, steps=48, batch=32)):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            if per_batch or (step + 1) % 16 == 0:          # StepLR(step_size=2, gamma=0.5)
                for group in optimizer.param_groups:
                    group["lr"] *= 0.5 ** (1 / 2)
    codes = [f.code for f in monitor.report().findings]
    assert ("LR_SCHEDULE_TOO_FAST" in codes) == per_batch
