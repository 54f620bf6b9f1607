"""The step recorder: clauses of the training-step contract (gradients cleared once per step and
never between a backward and its step; clipping on the gradients the step applies), each
spelling of the bug named, each healthy idiom quiet."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from diagnostics import Monitor

STEPS = 12


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(STEPS * 16, 8, generator=g)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long()


def _model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))


def _loop(kind, *, optimizer_of=lambda m: torch.optim.SGD(m.parameters(), lr=0.05)):
    """One optimizer step per batch; ``kind`` places the calls."""
    model = _model()
    optimizer = optimizer_of(model)
    params = model.parameters()                   # a generator: consumed by the first use
    x, y = _data()
    with Monitor(model, optimizer, every=1) as monitor:
        for i in range(STEPS):
            xb, yb = x[i * 16:(i + 1) * 16], y[i * 16:(i + 1) * 16]
            optimizer.zero_grad()
            if kind == "clip_before_backward":
                nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            if kind == "clip":
                nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            if kind == "clip_exhausted":
                nn.utils.clip_grad_norm_(params, 0.5)
            if kind == "zeroed_before_step":
                optimizer.zero_grad(set_to_none=False)
            if kind == "none_before_step":
                for p in model.parameters():
                    p.grad = None
            if kind == "monitor_step_before_clip":
                monitor.step(loss)
                nn.utils.clip_grad_value_(model.parameters(), 0.1)
                optimizer.step()
                continue
            optimizer.step()
            if kind == "clip_after_step":
                nn.utils.clip_grad_value_(model.parameters(), 0.1)
            monitor.step(loss)
    return monitor.report()


def _accumulating(clear, *, micro=4):
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = _data()
    with Monitor(model, optimizer, every=1) as monitor:
        for i in range(STEPS):
            for k in range(micro):
                rows = slice(i * 16 + k * 4, i * 16 + (k + 1) * 4)
                if clear == "zeros":
                    optimizer.zero_grad(set_to_none=False)
                elif clear == "loop":
                    for p in model.parameters():
                        if p.grad is not None:
                            p.grad.zero_()
                (F.cross_entropy(model(x[rows]), y[rows]) / micro).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
            monitor.step(torch.tensor(1.0))
    return monitor.report()


def _alarms(report):
    return [f.code for f in report.findings if f.is_alarm]


def _finding(report, code):
    return next(f for f in report.findings if f.code == code)


@pytest.mark.parametrize("kind", ["healthy", "clip", "monitor_step_before_clip"])
def test_healthy_steps_are_quiet(kind):
    codes = set(_alarms(_loop(kind)))
    assert not codes & {"CLIP_HAS_NO_EFFECT", "GRADIENTS_CLEARED_BEFORE_STEP",
                        "ACCUMULATION_DISCARDED"}, codes


@pytest.mark.parametrize("kind, words", [
    ("clip_after_step", "outside the window between loss.backward() and optimizer.step()"),
    ("clip_before_backward", "outside the window between loss.backward() and optimizer.step()"),
    ("clip_exhausted", "it was given no tensors"),
])
def test_a_clip_that_acts_on_nothing_the_step_applies_is_named(kind, words):
    report = _loop(kind)
    assert _alarms(report)[0] == "CLIP_HAS_NO_EFFECT"
    finding = _finding(report, "CLIP_HAS_NO_EFFECT")
    assert words in finding.message and finding.evidence["ineffective_steps"] >= 2


def test_clipping_a_copy_of_the_model_is_named():
    model = _model()
    copy = _model(seed=1)                          # no gradients ever reach it
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = _data()
    with Monitor(model, optimizer, every=1) as monitor:
        for i in range(STEPS):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x[i * 16:(i + 1) * 16]), y[i * 16:(i + 1) * 16])
            loss.backward()
            nn.utils.clip_grad_norm_(copy.parameters(), 0.5)
            optimizer.step()
            monitor.step(loss)
    finding = _finding(monitor.report(), "CLIP_HAS_NO_EFFECT")
    assert finding.evidence["reason"] == "no_gradients"


def test_clipping_another_trained_model_is_not_this_optimizers_business():
    """A GAN's other player: its parameters hold gradients of their own."""
    model, other = _model(), _model(seed=1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = _data()
    with Monitor(model, optimizer, every=1) as monitor:
        for i in range(STEPS):
            xb, yb = x[i * 16:(i + 1) * 16], y[i * 16:(i + 1) * 16]
            other.zero_grad()
            F.cross_entropy(other(xb), yb).backward()
            nn.utils.clip_grad_norm_(other.parameters(), 0.5)    # before this step's backward
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    assert "CLIP_HAS_NO_EFFECT" not in _alarms(monitor.report())


@pytest.mark.parametrize("kind, how", [("zeroed_before_step", "zeroed in place"),
                                       ("none_before_step", "set to None")])
def test_gradients_cleared_between_backward_and_step_are_named_first(kind, how):
    report = _loop(kind)
    assert _alarms(report)[0] == "GRADIENTS_CLEARED_BEFORE_STEP"
    assert _finding(report, "GRADIENTS_CLEARED_BEFORE_STEP").evidence["cleared_by"] == how


@pytest.mark.parametrize("clear", ["zeros", "loop"])
def test_accumulation_cleared_in_place_is_seen(clear):
    finding = _finding(_accumulating(clear), "ACCUMULATION_DISCARDED")
    assert finding.evidence["cleared_by"] == "zeroed in place"
    assert (finding.evidence["backward_passes"], finding.evidence["discarded_passes"]) == (4, 3)


def test_healthy_accumulation_clearing_in_place_after_the_step_is_quiet():
    assert "ACCUMULATION_DISCARDED" not in _alarms(_accumulating("after_step_only"))


def test_a_closure_the_step_evaluates_is_not_a_window():
    """Lightning's and L-BFGS' order: step(closure) with zero_grad, backward and clip inside."""
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = _data()
    with Monitor(model, optimizer, every=1) as monitor:
        for i in range(STEPS):
            xb, yb = x[i * 16:(i + 1) * 16], y[i * 16:(i + 1) * 16]

            def closure():
                optimizer.zero_grad()
                loss = F.cross_entropy(model(xb), yb)
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                return loss
            monitor.step(optimizer.step(closure))
    codes = set(_alarms(monitor.report()))
    assert not codes & {"CLIP_HAS_NO_EFFECT", "GRADIENTS_CLEARED_BEFORE_STEP",
                        "ACCUMULATION_DISCARDED"}, codes


def test_a_step_the_grad_scaler_skipped_does_not_join_two_windows():
    """A skipped step (inf gradients) never calls optimizer.step(); the scaler's update() ends
    its window, so the next step's zero_grad discards nothing."""
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    x, y = _data()
    with Monitor(model, optimizer, scaler=scaler, every=1) as monitor:
        for i in range(STEPS):
            xb, yb = x[i * 16:(i + 1) * 16], y[i * 16:(i + 1) * 16]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            scaler.scale(loss * (1e36 if i % 6 < 3 else 1.0)).backward()   # inf: skipped
            scaler.step(optimizer)
            scaler.update()
            monitor.step(loss)
    assert "ACCUMULATION_DISCARDED" not in _alarms(monitor.report())


def test_the_recorder_leaves_no_hook_and_no_patch_behind():
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    original = nn.utils.clip_grad_norm_
    x, y = _data()
    with Monitor(model, optimizer, every=1) as monitor:
        for i in range(3):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x[:16]), y[:16])
            loss.backward()
            assert nn.utils.clip_grad_norm_ is not original      # watched while open
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
            monitor.step(loss)
    assert nn.utils.clip_grad_norm_ is original
    for param in model.parameters():
        assert not param._backward_hooks
        assert not getattr(param, "_post_accumulate_grad_hooks", None)
    assert not optimizer._optimizer_step_pre_hooks and not optimizer._optimizer_step_post_hooks
