"""Mixed precision on the CPU: fp16/bf16 autocast and a GradScaler, healthy (quiet, skipped
steps counted, gradients judged unscaled, training unchanged) and broken (AMP_OVERFLOW)."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from diagnostics import DiagnosticsError, Monitor  # noqa: E402
from diagnostics.backends import get_backend  # noqa: E402
from diagnostics.monitor.kernels import kernels_for  # noqa: E402
from diagnostics.monitor.records import GradientRecord, Sample  # noqa: E402
from tests.diagnostics.monitor_nets import mlp, frameworks  # noqa: E402
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401,E402 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TORCH, MINIGRAD = frameworks()


class Amplify(nn.Module):
    """Multiplies its input: in float16 a large factor overflows (the planted AMP bug)."""

    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor


def amp_run(*, init_scale=2.0 ** 16, clip=None, give_scaler=True, factor=None, steps=150,
            every=10, dtype=torch.float16, use_scaler=True, monitor=True, norms=None,
            per_step_gradients=False):
    """Adam on a learnable 4-class problem under CPU autocast; returns (losses, report,
    scaler, final state)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 16, generator=g)
    y = x[:, :4].argmax(1)
    layers = [nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)]
    model = nn.Sequential(*layers + ([Amplify(factor)] if factor else []))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale) if use_scaler else None
    losses, report = [], None
    mon = (Monitor(model, optimizer, every=every, scaler=scaler if give_scaler else None,
                   per_step_gradients=per_step_gradients) if monitor else None)
    try:
        for _ in range(steps):
            rows = torch.randint(0, 512, (32,), generator=g)
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=dtype):
                loss = F.cross_entropy(model(x[rows]), y[rows])
            if scaler is None:
                loss.backward()
            else:
                scaler.scale(loss).backward()
            if clip is not None:
                if scaler is not None:
                    scaler.unscale_(optimizer)
                norm = nn.utils.clip_grad_norm_(model.parameters(), clip)
                if norms is not None:
                    norms.append(float(norm))
            if scaler is None:
                optimizer.step()
            else:
                scaler.step(optimizer)
                scaler.update()
            if mon is not None:
                mon.step(loss)
            losses.append(loss.item())
        if mon is not None:
            report = mon.report()
    finally:
        if mon is not None:
            mon.close()
    return losses, report, scaler, [p.detach().clone() for p in model.parameters()]


def alarms(report):
    return [str(f) for f in report.findings if f.severity != "info"]


@pytest.mark.parametrize("give_scaler", [True, False], ids=["scaler", "detected"])
@pytest.mark.parametrize("clip", [None, 1.0], ids=["plain", "unscale_clip"])
def test_healthy_fp16_with_a_grad_scaler_is_quiet(give_scaler, clip):
    losses, report, scaler, state = amp_run(give_scaler=give_scaler, clip=clip)
    assert losses[-1] < 0.3 * losses[0]                      # it learns
    assert alarms(report) == [] and report.resolved == []
    amp = report.mixed_precision
    assert amp["kind"] == ("fp16 autocast + GradScaler" if give_scaler else "fp16 autocast")
    assert amp["skipped_steps"] == 0
    plain_losses, _, plain_scaler, plain_state = amp_run(clip=clip, monitor=False)
    assert losses == plain_losses and scaler.get_scale() == plain_scaler.get_scale()
    assert all(torch.equal(a, b) for a, b in zip(state, plain_state))   # nothing changed


@pytest.mark.parametrize("give_scaler", [True, False], ids=["scaler", "detected"])
def test_skipped_steps_while_the_scaler_finds_its_scale_are_counted_not_reported(give_scaler):
    losses, report, scaler, _ = amp_run(init_scale=2.0 ** 40, give_scaler=give_scaler, every=1)
    assert scaler.get_scale() <= 2.0 ** 24 and losses[-1] < 0.3 * losses[0]
    assert alarms(report) == [] and report.resolved == []
    amp = report.mixed_precision
    assert amp["skipped_steps"] >= 15                        # 2**40 came down, one halving each
    if give_scaler:
        assert amp["counted_steps"] == 150 and amp["scale"] == scaler.get_scale()


def test_gradients_are_judged_unscaled_as_the_optimizer_applies_them():
    norms = []
    _, report, scaler, _ = amp_run(clip=math.inf, every=1, norms=norms, steps=12)
    recorded = report.history.column("gradient_norm")
    assert scaler.get_scale() == 2.0 ** 16
    np.testing.assert_allclose(recorded, norms, rtol=1e-5)   # clip_grad_norm_ after unscale_
    assert recorded.max() < 100


def test_bf16_autocast_without_a_scaler_is_quiet_and_named():
    losses, report, _, _ = amp_run(dtype=torch.bfloat16, use_scaler=False, give_scaler=False)
    assert losses[-1] < 0.3 * losses[0]
    assert alarms(report) == [] and report.mixed_precision == {"kind": "bf16 autocast"}


def test_a_scale_that_keeps_falling_is_amp_overflow():
    _, report, scaler, _ = amp_run(factor=1e5)      # logits x 1e5 in float16: overflow
    (finding,) = [f for f in report.findings if f.code == "AMP_OVERFLOW"]
    assert finding.severity == "warning" and "fp16 overflow" in finding.message
    assert finding.evidence["scale"] <= 2.0 ** 6 and "bfloat16" in finding.suggestion
    assert finding.evidence["skipped_steps"] >= 10


def test_a_loss_that_overflows_every_step_collapses_the_scale():
    _, report, scaler, _ = amp_run(factor=1e9)      # inf logits: every step skipped
    assert scaler.get_scale() < 1
    (finding,) = [f for f in report.findings if f.code == "AMP_OVERFLOW"]
    assert finding.severity == "error" and "collapsed" in finding.message
    assert "EXPLODING_GRADIENTS" not in report.codes()
    assert "PARAMS_NOT_UPDATING" not in report.codes()


def test_persistent_skipping_is_amp_overflow_without_the_scaler_too():
    _, report, _, _ = amp_run(factor=1e9, give_scaler=False)
    (finding,) = [f for f in report.findings if f.code == "AMP_OVERFLOW"]
    assert finding.severity == "error" and len(finding.evidence["skipped_sampled_steps"]) >= 3
    assert "EXPLODING_GRADIENTS" not in report.codes()


def test_scaler_must_be_a_grad_scaler_on_a_torch_model():
    TORCH.seed(0)
    with pytest.raises(DiagnosticsError, match="scaler"):
        Monitor(mlp(TORCH, [4, 2]), scaler="amp")
    with pytest.raises(DiagnosticsError, match="scaler"):
        Monitor(mlp(MINIGRAD, [4, 2]), scaler=torch.amp.GradScaler("cpu"))


# ------------------------------------------------------------------- statistics that hold
def kernels():
    return kernels_for(get_backend(nn.Linear(1, 1)))


def test_gradient_statistics_divide_out_the_scale_before_squaring():
    k = kernels()
    grad = torch.full((4, 3), 3e18)                           # squares overflow float32
    squares, total, largest = k.gather(k.gradient_statistics(
        grad, per_unit=True, inv_scale=torch.tensor(2.0 ** -40)))
    assert squares == pytest.approx(12 * (3e18 / 2 ** 40) ** 2, rel=1e-6)
    assert total == pytest.approx(12 * 3e18 / 2 ** 40, rel=1e-6)
    np.testing.assert_allclose(largest, [3e18 / 2 ** 40] * 4, rtol=1e-6)


def test_a_norm_whose_float32_sum_overflows_is_large_but_finite():
    k = kernels()
    parts = k.gather(k.gradient_statistics(torch.full((1000,), 1e20)))
    record = GradientRecord.from_parts(1000, parts)
    assert math.isinf(parts[0]) and record.finite
    assert math.isfinite(record.norm) and record.norm >= math.sqrt(1000) * 1e20 * 0.999
    sample = Sample(0, gradients={"w": record})
    assert math.isfinite(sample.gradient_norm)
    nan = GradientRecord.from_parts(3, k.gather(k.gradient_statistics(
        torch.tensor([1.0, float("nan"), 2.0]))))
    assert not nan.finite


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_activation_statistics_do_not_overflow(dtype):
    k = kernels()
    x = torch.full((64, 8), 60000.0).to(dtype)                # 60000**2 overflows float16
    total, squares, nonzero, unit_max, _ = k.gather(k.activation_statistics(x))
    value = float(x[0, 0])
    assert total == pytest.approx(512 * value, rel=1e-3)
    assert squares == pytest.approx(512 * value ** 2, rel=1e-3) and nonzero == 512
    assert np.all(unit_max == value)


def test_autocast_dtype_is_read_inside_autocast_only():
    k, weight = kernels(), torch.zeros(2)
    assert k.autocast_dtype(weight) is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert k.autocast_dtype(weight) == "bfloat16"


def test_preflight_does_not_call_a_scaler_finding_its_scale_a_plateau():
    from diagnostics import preflight

    torch.manual_seed(0)
    x = torch.randn(64, 16, generator=torch.Generator().manual_seed(0))
    y = x[:, :4].argmax(1)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 40)   # the first ~20 steps skip

    def train_step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.cross_entropy(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    report = preflight(model, F.cross_entropy, x, y, optimizer=optimizer, train_step=train_step)
    (item,) = [i for i in report.items if i.name == "training steps"]
    # earlier items that train through train_step may already have brought the scale down
    assert item.status == "PASS" or (item.status == "SKIP"
                                     and "skipped all 8 steps" in item.summary)
    assert "LOSS_PLATEAU" not in [f.code for f in report.findings]
