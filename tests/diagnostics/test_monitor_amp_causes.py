"""Two causes of mixed-precision runs that go wrong without overflowing: clipping before
``scaler.unscale_`` (CLIP_BEFORE_UNSCALE) and an optimizer eps that float16 rounds to 0
(EPS_UNDERFLOWS); each on the bug and on its fixed twin, and the clipping patch never left
behind."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import minigrad  # noqa: E402
from diagnostics import Monitor, preflight  # noqa: E402
from diagnostics.monitor.probes import clipping  # noqa: E402
from diagnostics.monitor.probes.optimizer_eps import lost_eps  # noqa: E402
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401,E402 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
ORIGINALS = {(owner, name): getattr(owner, name)
             for owner in (torch.nn.utils, torch.nn.utils.clip_grad)
             for name in clipping.PATCHED}
ORIGINALS[(torch.nn.utils.clip_grad, clipping.INNER)] = getattr(torch.nn.utils.clip_grad,
                                                                 clipping.INNER)
CLIP_BY_NAME = torch.nn.utils.clip_grad_norm_   # ``from torch.nn.utils import clip_grad_norm_``


def patched():
    """The clipping functions that are not torch's own right now."""
    return [f"{owner.__name__}.{name}" for (owner, name), original in ORIGINALS.items()
            if getattr(owner, name) is not original]


def codes(report, severities=("warning", "error")):
    return [f.code for f in report.findings if f.severity in severities]


def data(rows=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 16, generator=g)
    return x, x[:, :4].argmax(1)


def mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def amp_loop(*, unscale, clip="norm", steps=30, give_scaler=True, enabled=True, monitor=True,
             clip_params=None, generator=False):
    """fp16 autocast + GradScaler, clipping each step; returns (report, losses, state)."""
    x, y = data()
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16, enabled=enabled)
    mon = Monitor(model, opt, every=5, scaler=scaler if give_scaler else None) if monitor else None
    losses = []
    try:
        for step in range(steps):
            rows = slice((step * 32) % 256, (step * 32) % 256 + 32)
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = F.cross_entropy(model(x[rows]), y[rows])
            scaler.scale(loss).backward()
            if unscale:
                scaler.unscale_(opt)
            params = clip_params if clip_params is not None else model.parameters()
            if not generator:
                params = list(params)
            if clip == "norm":
                torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)
            elif clip == "by name":   # bound before any Monitor patched the module's name
                CLIP_BY_NAME(params, 1.0)
            else:
                torch.nn.utils.clip_grad.clip_grad_value_(parameters=params, clip_value=0.5)
            scaler.step(opt)
            scaler.update()
            if mon is not None:
                mon.step(loss)
            losses.append(loss.item())
        report = mon.report() if mon is not None else None
    finally:
        if mon is not None:
            mon.close()
    return report, losses, [p.detach().clone() for p in model.parameters()]


# ----------------------------------------------------------------- CLIP_BEFORE_UNSCALE
def test_clipping_before_unscale_is_named_with_the_scale_and_the_shrink():
    report, _, _ = amp_loop(unscale=False)
    found = [f for f in report.findings if f.code == "CLIP_BEFORE_UNSCALE"]
    assert len(found) == 1 and found[0].severity == "warning"
    finding = found[0]
    assert finding.first_step == 0 and finding.location == "optimizer"
    assert finding.evidence["scale"] == 2.0 ** 16 and finding.evidence["limit"] == 1.0
    assert "clip_grad_norm_(max_norm=1.0) ran on gradients still multiplied by the loss " \
           "scale 65536" in finding.message
    assert "scaler.unscale_(optimizer)" in finding.suggestion
    unscaled = finding.evidence["total_norm"] / 2.0 ** 16
    assert 0.01 < unscaled < 100          # the true norm: nothing explodes
    assert "EXPLODING_GRADIENTS" not in codes(report)
    assert patched() == []


def test_clip_grad_norm_imported_by_name_before_the_monitor_is_seen():
    """``from torch.nn.utils import clip_grad_norm_`` at the top of the user's script holds
    torch's own function: it is seen through the helper every call of it goes through."""
    report, _, _ = amp_loop(unscale=False, clip="by name")
    finding = next(f for f in report.findings if f.code == "CLIP_BEFORE_UNSCALE")
    assert finding.first_step == 0 and finding.evidence["scale"] == 2.0 ** 16
    assert finding.message.startswith("clip_grad_norm_(max_norm=1.0) ran on gradients")
    assert 0.01 < finding.evidence["total_norm"] / 2.0 ** 16 < 100
    quiet, _, _ = amp_loop(unscale=True, clip="by name")
    assert "CLIP_BEFORE_UNSCALE" not in codes(quiet, ("info", "warning", "error"))
    assert patched() == []


def test_clip_grad_value_before_unscale_is_named_too():
    report, _, _ = amp_loop(unscale=False, clip="value", generator=True)
    finding = next(f for f in report.findings if f.code == "CLIP_BEFORE_UNSCALE")
    assert finding.message.startswith("clip_grad_value_(clip_value=0.5) ran on gradients")
    assert "0.5 / 65536 = 7.63e-06" in finding.message


@pytest.mark.parametrize("clip", ["norm", "value"])
def test_unscale_then_clip_is_quiet_and_the_patch_changes_nothing(clip):
    report, losses, state = amp_loop(unscale=True, clip=clip, generator=True)
    assert codes(report) == [] and "CLIP_BEFORE_UNSCALE" not in codes(report, ("info",))
    _, plain_losses, plain_state = amp_loop(unscale=True, clip=clip, monitor=False)
    assert losses == plain_losses
    assert all(torch.equal(a, b) for a, b in zip(state, plain_state))


def test_the_buggy_loop_trains_the_same_with_and_without_the_monitor():
    _, losses, state = amp_loop(unscale=False, generator=True)
    _, plain_losses, plain_state = amp_loop(unscale=False, monitor=False)
    assert losses == plain_losses
    assert all(torch.equal(a, b) for a, b in zip(state, plain_state))


def test_without_the_scaler_or_with_a_disabled_one_nothing_stays_patched():
    """The step recorder watches clipping with or without a scaler (CLIP_HAS_NO_EFFECT); the
    patch goes when the Monitor closes, and no scaler means no CLIP_BEFORE_UNSCALE."""
    x, y = data()
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    off = torch.amp.GradScaler("cpu", enabled=False)
    for scaler in (None, off):
        with Monitor(model, opt, scaler=scaler) as mon:
            mon.step(F.cross_entropy(model(x), y))
        assert patched() == []
    report, _, _ = amp_loop(unscale=False, enabled=False)
    assert "CLIP_BEFORE_UNSCALE" not in codes(report)
    report, _, _ = amp_loop(unscale=False, give_scaler=False)
    assert "CLIP_BEFORE_UNSCALE" not in codes(report)


def test_clipping_another_models_parameters_is_not_this_optimizers_business():
    other = mlp(seed=1)
    other(torch.randn(2, 16)).sum().backward()
    report, _, _ = amp_loop(unscale=False, clip_params=list(other.parameters()), steps=6)
    assert "CLIP_BEFORE_UNSCALE" not in codes(report)


def test_the_patch_is_restored_after_close_and_after_an_exception_in_the_block():
    x, y = data()
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu")
    mon = Monitor(model, opt, scaler=scaler)
    assert sorted(patched()) == sorted(f"{o.__name__}.{n}" for o, n in ORIGINALS)
    wrapped = torch.nn.utils.clip_grad_norm_
    assert wrapped.__name__ == "clip_grad_norm_" and wrapped.__doc__ == \
        ORIGINALS[(torch.nn.utils, "clip_grad_norm_")].__doc__
    mon.close()
    assert patched() == []
    mon.close()                      # idempotent
    assert patched() == []
    with pytest.raises(ZeroDivisionError), Monitor(model, opt, scaler=scaler) as mon:
        mon.step(F.cross_entropy(model(x), y))
        assert patched() != []
        raise ZeroDivisionError("the user's loop")
    assert patched() == []


@pytest.mark.parametrize("order", ["inner_first", "outer_first"])
def test_nested_monitors_share_the_patch_and_the_last_one_restores_it(order):
    x, y = data()
    models = [mlp(seed=s) for s in (0, 1)]
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in models]
    scalers = [torch.amp.GradScaler("cpu") for _ in models]
    first = Monitor(models[0], opts[0], every=1, scaler=scalers[0])
    second = Monitor(models[1], opts[1], every=1, scaler=scalers[1])
    try:
        closing, staying = (second, first) if order == "inner_first" else (first, second)
        closing.close()
        assert patched() != []              # the other Monitor still listens
        index = 0 if staying is first else 1
        model, opt, scaler = models[index], opts[index], scalers[index]
        for _ in range(2):
            opt.zero_grad()
            scaler.scale(F.cross_entropy(model(x), y)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            staying.step(1.0)
        assert "CLIP_BEFORE_UNSCALE" in codes(staying.report())
        assert "CLIP_BEFORE_UNSCALE" not in codes(closing.report())
    finally:
        first.close()
        second.close()
    assert patched() == []


def test_a_patch_laid_over_the_monitors_is_left_in_place():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    mon = Monitor(model, opt, scaler=torch.amp.GradScaler("cpu"))
    theirs = torch.nn.utils.clip_grad_value_
    try:
        def over(*args, **kwargs):
            return theirs(*args, **kwargs)
        torch.nn.utils.clip_grad_value_ = over
        mon.close()
        assert torch.nn.utils.clip_grad_value_ is over     # someone else's: not undone
        assert torch.nn.utils.clip_grad_norm_ is ORIGINALS[(torch.nn.utils, "clip_grad_norm_")]
        model(torch.randn(2, 16)).sum().backward()
        over(model.parameters(), 1e-3)                     # the wrapper inside calls through
        assert all(float(p.grad.abs().max()) <= 1.0001e-3 for p in model.parameters())
    finally:
        torch.nn.utils.clip_grad_value_ = ORIGINALS[(torch.nn.utils, "clip_grad_value_")]


def test_a_failure_inside_the_wrapper_is_quoted_and_takes_the_patch_off(monkeypatch):
    def boom(*args):
        raise KeyError("a GradScaler of another version")
    monkeypatch.setattr(clipping.ClippingProbe, "_note", boom)
    report, losses, state = amp_loop(unscale=False, steps=12)
    errors = [f for f in report.findings if f.code == "MONITOR_ERROR"]
    assert len(errors) == 1 and "ClippingProbe" in errors[0].message
    assert "KeyError" in errors[0].message and errors[0].severity == "info"
    assert patched() == []
    _, plain_losses, plain_state = amp_loop(unscale=False, steps=12, monitor=False)
    assert losses == plain_losses
    assert all(torch.equal(a, b) for a, b in zip(state, plain_state))


def test_a_bad_call_raises_torchs_own_error():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with Monitor(model, opt, scaler=torch.amp.GradScaler("cpu")), pytest.raises(TypeError):
        torch.nn.utils.clip_grad_norm_(3, 1.0)


# ----------------------------------------------------------------------- EPS_UNDERFLOWS
def half_adam(*, eps, dtype=torch.float16, steps=10, every=5):
    x, y = data(rows=64, seed=1)
    model = mlp().to(dtype)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=eps)
    with Monitor(model, opt, every=every) as mon:
        for _ in range(steps):
            opt.zero_grad()
            loss = F.cross_entropy(model(x.to(dtype)).float(), y)
            loss.backward()
            opt.step()
            mon.step(loss)
    return mon.report()


def test_adam_eps_that_is_zero_in_float16_is_named_at_the_first_step():
    report = half_adam(eps=1e-8)
    finding = next(f for f in report.findings if f.code == "EPS_UNDERFLOWS")
    assert report.findings[0] is finding                     # the root cause leads the report
    # a warning of its own, shown as an error: the NaN that follows from it is one
    assert finding.severity == "error" and finding.first_step == 0
    assert finding.message.startswith("Adam's eps=1e-08 is 0 in float16, the dtype of 4 of "
                                      "its parameter tensors (676 values)")
    assert "eps=1e-4" in finding.suggestion and "float32" in finding.suggestion
    assert finding.evidence["eps_in_dtype"] == 0.0
    nan = [f for f in report.findings if f.code == "NAN_LOSS"]
    assert all(f.first_step > finding.first_step for f in nan)   # named before the NaN
    lead = "first raise the optimizer's eps (1e-08 is 0 in float16"
    assert nan and all(f.suggestion.startswith(lead) for f in nan)  # the NaN's advice leads there
    assert all(f.follows_from == "EPS_UNDERFLOWS at optimizer" for f in nan)


@pytest.mark.parametrize("eps, dtype", [(1e-4, torch.float16), (1e-8, torch.bfloat16),
                                        (1e-8, torch.float32)])
def test_an_eps_the_dtype_holds_is_quiet(eps, dtype):
    report = half_adam(eps=eps, dtype=dtype, steps=20)
    assert "EPS_UNDERFLOWS" not in codes(report, ("info", "warning", "error"))
    assert codes(report) == []


def test_fp16_autocast_over_float32_weights_is_quiet():
    x, y = data()
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)     # eps=1e-8 on float32 weights
    scaler = torch.amp.GradScaler("cpu")
    with Monitor(model, opt, every=5, scaler=scaler) as mon:
        for _ in range(20):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = F.cross_entropy(model(x[:32]), y[:32])
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            mon.step(loss)
    assert codes(mon.report()) == []


def test_only_the_groups_and_dtypes_that_lose_eps_are_counted():
    half, full = nn.Linear(4, 3).half(), nn.Linear(4, 3)
    opt = torch.optim.RMSprop([{"params": half.parameters(), "eps": 1e-9},
                               {"params": full.parameters(), "eps": 1e-9},
                               {"params": [nn.Parameter(torch.zeros(5, dtype=torch.half))],
                                "eps": 1e-3}])
    (lost,) = lost_eps(opt)
    assert (lost.optimizer, lost.eps, lost.dtype, lost.value) == ("RMSprop", 1e-9, "float16", 0)
    assert (lost.tensors, lost.values, lost.groups) == (2, 15, (0,))


def test_a_subnormal_eps_far_from_the_one_set_is_lost_too():
    opt = torch.optim.Adam(nn.Linear(4, 3).half().parameters(), eps=3e-8)
    (lost,) = lost_eps(opt)
    assert lost.value == pytest.approx(2.0 ** -24)


def test_a_fused_optimizer_computes_in_float32_and_is_quiet():
    params = nn.Linear(4, 3).half().parameters()
    try:
        opt = torch.optim.Adam(params, eps=1e-8, fused=True)
    except (RuntimeError, ValueError) as error:
        pytest.skip(f"no fused Adam here: {error}")
    assert lost_eps(opt) == []


def test_optimizers_without_eps_and_minigrad_ones_are_quiet():
    assert lost_eps(torch.optim.SGD(nn.Linear(4, 3).half().parameters(), lr=0.1)) == []
    model = minigrad.nn.Linear(4, 3)
    assert lost_eps(minigrad.optim.Adam(model.parameters(), eps=1e-8)) == []


@given(st.floats(min_value=1e-30, max_value=1.0))
def test_eps_is_lost_only_where_the_dtype_cannot_hold_it(eps):
    def lost(dtype):
        return lost_eps(torch.optim.Adam([nn.Parameter(torch.zeros(2, dtype=dtype))], eps=eps))
    assert lost(torch.float32) == [] and lost(torch.bfloat16) == []
    if eps >= torch.finfo(torch.float16).tiny:          # a normal float16 number
        assert lost(torch.float16) == []
    if eps < 2.0 ** -25:                                # below half the smallest subnormal
        assert [found.value for found in lost(torch.float16)] == [0.0]
    for found in lost(torch.float16):
        assert found.value == float(np.float16(eps))


def test_preflight_names_the_eps_in_its_parameters_item():
    x, y = data(rows=16)
    model = mlp().half()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-8)
    report = preflight(model, lambda out, t: F.cross_entropy(out.float(), t), x.half(), y,
                       optimizer=opt)
    item = report.item("parameters")
    assert item.status == "FAIL" and [f.code for f in item.findings] == ["EPS_UNDERFLOWS"]
    model = mlp()
    healthy = preflight(model, F.cross_entropy, x, y,
                        optimizer=torch.optim.Adam(model.parameters(), eps=1e-8))
    assert "EPS_UNDERFLOWS" not in [f.code for f in healthy.findings]


def test_a_probe_that_raises_on_close_does_not_keep_the_patch_on(monkeypatch):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    mon = Monitor(model, opt, scaler=torch.amp.GradScaler("cpu"))
    first = mon._probes[0]

    def broken_close():
        raise RuntimeError("a probe's close failed")
    monkeypatch.setattr(first, "close", broken_close)
    with pytest.raises(RuntimeError, match="close failed"):
        mon.close()
    assert patched() == []
