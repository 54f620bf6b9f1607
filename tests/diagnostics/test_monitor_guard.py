"""The step guard (``Monitor(guard=..., guard_replay=...)``): a bad optimizer step (NaN/inf or
spiking gradients) is kept from being applied, or stops the run before it is applied, or is
replayed to tell a transient fault from a reproducible one; nothing else of the run changes."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics import DiagnosticsError, GuardStopped, Monitor
from diagnostics.monitor.probes.step_gradients import spike_median
from tests.diagnostics.monitor_nets import frameworks, mlp
from tests.support.hooks import hook_state

torch = pytest.importorskip("torch")
STEPS, BAD = 40, (12, 27)


def _data(seed=1, bad=BAD, where="input"):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(STEPS, 16, 6, generator=generator)
    y = x[..., :2].sum(-1, keepdim=True) - x[..., 2:3]
    for step in bad:
        if where == "input":
            x[step, 5, 1] = float("nan")
        else:
            y[step, 3, 0] = float("inf")
    return x, y


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 24), torch.nn.Tanh(), torch.nn.Linear(24, 1))


def _train(model, optimizer, x, y, *, monitor=None, omit=(), after_step=None):
    for step in range(len(x)):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[step]), y[step])
        loss.backward()
        if step not in omit:
            optimizer.step()
        if after_step is not None:
            after_step(step)
        if monitor is not None:
            monitor.step(loss)


def _state(model, optimizer):
    params = [p.detach().clone() for p in model.parameters()]
    moments = [{k: v.clone() if torch.is_tensor(v) else v for k, v in s.items()}
               for s in optimizer.state.values()]
    return params, moments


def _same(a, b):
    (pa, ma), (pb, mb) = a, b
    return (all(torch.equal(u, v) for u, v in zip(pa, pb)) and len(ma) == len(mb)
            and all(k in t and (torch.equal(v, t[k]) if torch.is_tensor(v) else v == t[k])
                    for s, t in zip(ma, mb) for k, v in s.items()))


@pytest.mark.parametrize("make", [
    lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
    lambda params: torch.optim.Adam(params, lr=1e-2),
    lambda params: torch.optim.AdamW(params, lr=1e-2, foreach=False),
    lambda params: torch.optim.RMSprop(params, lr=1e-3)], ids=["sgd", "adam", "adamw", "rms"])
def test_skip_leaves_the_run_bit_for_bit_as_if_the_bad_steps_were_not_taken(make):
    x, y = _data()
    reference = _model()
    reference_optimizer = make(reference.parameters())
    _train(reference, reference_optimizer, x, y, omit=BAD)
    model = _model()
    optimizer = make(model.parameters())
    before = hook_state(model)
    rng = torch.get_rng_state()
    with Monitor(model, optimizer, guard="skip") as monitor:
        _train(model, optimizer, x, y, monitor=monitor)
    assert torch.equal(torch.get_rng_state(), rng)
    assert _same(_state(model, optimizer), _state(reference, reference_optimizer))
    assert [s.step for s in monitor.skipped_steps] == list(BAD)
    assert all(s.source == "data" and s.batches == (s.step, s.step)
               for s in monitor.skipped_steps)
    assert hook_state(model) == before and not optimizer._optimizer_step_pre_hooks


def test_a_skipped_step_gives_the_gradients_back_after_the_optimizer_step():
    """Code that reads ``.grad`` after ``optimizer.step()`` (logging a norm) still finds it."""
    x, y = _data()
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    seen = []
    with Monitor(model, optimizer, guard="skip") as monitor:
        _train(model, optimizer, x, y, monitor=monitor, after_step=lambda step: seen.append(
            all(p.grad is not None for p in model.parameters())))
    assert all(seen)


def test_the_report_names_the_batch_as_the_root_cause_and_the_skips_after_it():
    x, y = _data()
    model = _model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    with Monitor(model, optimizer, guard="skip") as monitor:
        _train(model, optimizer, x, y, monitor=monitor)
    report = monitor.report()
    first = report.findings[0]
    assert (first.code, first.location, first.first_step) == ("DATA_NONFINITE", "data", 12)
    assert "input 0 of batch 12 holds 1 NaN or inf value (row 5 of the batch)" in first.message
    skipped = next(f for f in report.findings if f.code == "STEPS_SKIPPED")
    assert skipped.severity == "warning" and skipped.evidence["step"] == 12
    assert [s.step for s in monitor.skipped_steps] == list(BAD)
    assert skipped.follows_from == "DATA_NONFINITE at data"
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_without_a_guard_the_bad_step_is_reported_at_its_step_and_applied():
    x, y = _data(bad=(12,))
    model = _model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    heard = []
    with Monitor(model, optimizer, on_finding=heard.append) as monitor:
        _train(model, optimizer, x, y, monitor=monitor)
    data = next(f for f in heard if f.code == "DATA_NONFINITE")
    assert data.first_step == 12 and "guard='skip'" in data.suggestion
    assert not all(torch.isfinite(p).all() for p in model.parameters())
    assert monitor.skipped_steps == ()


def test_stop_raises_before_the_bad_step_is_applied_with_the_report_written():
    x, y = _data()
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    reference = _model()
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.05)
    _train(reference, reference_optimizer, x[:12], y[:12])   # the 12 good steps
    heard = []
    before = hook_state(model)
    with pytest.raises(GuardStopped, match="step 12") as stopped:
        with Monitor(model, optimizer, guard="stop", on_finding=heard.append) as monitor:
            _train(model, optimizer, x, y, monitor=monitor)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), reference.parameters()))
    assert stopped.value.bad_step.step == 12 and stopped.value.bad_step.action == "stopped"
    assert "DATA_NONFINITE" in stopped.value.report.codes()
    assert any(f.code == "DATA_NONFINITE" for f in heard)   # told before the exception
    assert hook_state(model) == before and not optimizer._optimizer_step_pre_hooks
    assert all(p.grad is not None for p in model.parameters())   # given back


def test_skip_stops_after_too_many_consecutive_bad_steps():
    x, y = _data(bad=range(10, STEPS))
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with pytest.raises(GuardStopped, match="4 consecutive steps") as stopped:
        with Monitor(model, optimizer, guard="skip", max_consecutive_skips=3) as monitor:
            _train(model, optimizer, x, y, monitor=monitor)
    assert stopped.value.bad_step.step == 13
    assert [s.step for s in monitor.skipped_steps] == [10, 11, 12, 13]


def test_a_spike_from_one_absurd_target_is_skipped():
    x, y = _data(bad=())
    y[30, 0, 0] = 1e7      # a unit error in one label
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with Monitor(model, optimizer, guard="skip") as monitor:
        _train(model, optimizer, x, y, monitor=monitor)
    (skipped,) = monitor.skipped_steps
    assert skipped.step == 30 and skipped.reason == "spike" and skipped.norm > 1e4
    spike = next(f for f in monitor.report().findings if f.code == "EXPLODING_GRADIENTS")
    assert spike.severity == "warning" and spike.first_step == 30


class _FaultOnce(torch.nn.Module):
    """Multiplies the gradient passing back through it by NaN on its ``at``-th backward only:
    a fault that a replay of the same batch does not meet again."""

    def __init__(self, at):
        super().__init__()
        self.at, self.calls = at, 0

    def forward(self, x):
        if not x.requires_grad:
            return x
        self.calls += 1
        return _Poison.apply(x) if self.calls == self.at else x


class _Poison(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


def _faulty_model(at):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 24), _FaultOnce(at), torch.nn.Tanh(),
                               torch.nn.Linear(24, 1))


def test_replay_retries_a_transient_fault_with_the_replays_gradients():
    x, y = _data(bad=())
    model = _faulty_model(at=21)            # the backward of step 20 goes NaN, once
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    reference = _faulty_model(at=10 ** 9)   # never
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.05)
    _train(reference, reference_optimizer, x, y)
    with Monitor(model, optimizer, guard="skip", guard_replay=True) as monitor:
        _train(model, optimizer, x, y, monitor=monitor)
    assert monitor.skipped_steps == ()
    assert all(torch.allclose(p, q, atol=1e-6)
               for p, q in zip(model.parameters(), reference.parameters()))
    report = monitor.report()
    (account,) = [f for f in report.findings if f.code == "STEPS_SKIPPED"]
    assert account.severity == "info" and account.evidence["retried"] == [20]
    assert "a transient fault at step 20" in account.message
    assert not [f for f in report.findings if f.is_alarm]


def test_replay_names_the_loss_when_the_targets_make_the_gradient_nonfinite():
    x, y = _data(bad=(15,), where="target")
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with Monitor(model, optimizer, guard="skip", guard_replay=True) as monitor:
        _train(model, optimizer, x, y, monitor=monitor)
    (skipped,) = monitor.skipped_steps
    assert skipped.source == "loss" and "the loss or its targets" in skipped.detail


class _LogFeatures(torch.nn.Module):
    def forward(self, x):
        return torch.log(x)            # NaN where an input is negative: finite data, bad model


def test_replay_names_the_first_module_whose_output_is_nonfinite():
    x, y = _data(bad=())
    x = x.abs() + 0.5
    x[18, 2, 4] = -1.0                 # finite: the data search finds nothing, the replay does
    torch.manual_seed(0)
    model = torch.nn.Sequential(_LogFeatures(), torch.nn.Linear(6, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    with Monitor(model, optimizer, guard="skip", guard_replay=True) as monitor:
        _train(model, optimizer, x, y, monitor=monitor)
    (skipped,) = monitor.skipped_steps
    assert skipped.step == 18 and skipped.source == "forward"
    assert "the output of 0 is the first" in skipped.detail


def test_a_closure_step_is_judged_at_its_first_evaluation():
    x, y = _data(bad=(5,))
    model = _model()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
    with Monitor(model, optimizer, guard="skip") as monitor:
        for step in range(8):
            def closure():
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x[step]), y[step])
                loss.backward()
                return loss
            before = [p.detach().clone() for p in model.parameters()]
            loss = optimizer.step(closure)
            if step == 5:
                assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))
            monitor.step(loss)
    assert [s.step for s in monitor.skipped_steps] == [5]
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_an_error_inside_the_guard_never_reaches_the_training_loop(monkeypatch):
    from diagnostics.monitor.kernels.torch_kernels import TorchKernels

    def broken(self, grads):
        raise RuntimeError("a kernel bug")
    x, y = _data(bad=())
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    monkeypatch.setattr(TorchKernels, "gradient_norms", broken)
    with Monitor(model, optimizer, guard="skip") as monitor:
        _train(model, optimizer, x, y, monitor=monitor)
    errors = [f for f in monitor.report().findings if f.code == "MONITOR_ERROR"]
    assert errors and "a kernel bug" in errors[0].message


@pytest.mark.parametrize("kwargs, name", [
    ({"guard": "yes"}, "guard"), ({"guard_replay": True}, "guard_replay"),
    ({"guard": "stop", "guard_replay": True}, "guard_replay"),
    ({"guard": "skip", "max_consecutive_skips": 0}, "max_consecutive_skips")])
def test_bad_guard_arguments_are_refused_by_name(kwargs, name):
    model = _model()
    with pytest.raises(DiagnosticsError, match=name):
        Monitor(model, torch.optim.SGD(model.parameters(), lr=0.1), **kwargs)
    assert hook_state(model) == hook_state(_model())


def test_the_guard_needs_a_torch_optimizer():
    minigrad = frameworks()[1]
    model = mlp(minigrad, [4, 2])
    with pytest.raises(DiagnosticsError, match="guard"):
        Monitor(model, minigrad.optim.SGD(model.parameters(), lr=0.1), guard="skip")
    torch_model = _model()
    with pytest.raises(DiagnosticsError, match="guard"):
        Monitor(torch_model, guard="skip")


@settings(max_examples=60, deadline=None)
@given(spread=st.floats(0.0, 1.0), jump=st.floats(1.0, 1e6), seed=st.integers(0, 2 ** 16))
def test_a_spike_is_a_jump_beyond_both_the_floor_and_the_runs_own_spread(spread, jump, seed):
    norms = list(np.exp(np.random.default_rng(seed).normal(0.0, spread, 50)))
    median = spike_median(norms, jump * float(np.exp(np.median(np.log(norms)))), factor=100.0,
                          spread=10.0, min_history=10)
    logs = np.log(norms)
    mad = float(np.median(np.abs(logs - np.median(logs))))
    allowed = max(100.0, math.exp(10.0 * mad))
    if jump <= allowed * 0.999:
        assert median is None
    elif jump >= allowed * 1.001:
        assert median is not None and math.isclose(median, math.exp(np.median(logs)))


def test_no_spike_before_the_minimum_history():
    assert spike_median([1.0] * 9, 1e9, factor=100.0, spread=10.0, min_history=10) is None
    assert spike_median([1.0] * 10, 1e9, factor=100.0, spread=10.0, min_history=10) == 1.0


_SCRIPT = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.randn(30, 8, 6); y = x.sum(-1, keepdim=True)
x[11, 2, 3] = float("nan")
for i in range(30):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x[i]), y[i]).backward()
    opt.step()
print("finite:", all(bool(torch.isfinite(p).all()) for p in model.parameters()))
"""


@pytest.mark.parametrize("guard, code, finite", [(None, 0, "False"), ("skip", 0, "True"),
                                                 ("stop", 1, None)])
def test_gradhunt_watch_guards_an_unchanged_script(tmp_path, guard, code, finite):
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "train.py"
    script.write_text(_SCRIPT)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "scenarios.cli", "watch",
                          *(["--guard", guard] if guard else []), str(script)], cwd=root,
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == code, run.stderr
    assert "DATA_NONFINITE at data" in run.stderr
    if finite is None:
        assert "gradhunt stopped the training at step 10" in run.stderr
        assert "finite:" not in run.stdout and "Traceback" not in run.stderr
    else:
        assert f"finite: {finite}" in run.stdout


def test_the_trainer_callbacks_take_the_guard_and_check_it():
    from diagnostics.integrations.attached import AttachedMonitor, checked_guard

    assert checked_guard("skip") == "skip"
    with pytest.raises(DiagnosticsError, match="guard"):
        checked_guard("always")
    x, y = _data(bad=(3,))
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    attached = AttachedMonitor(model, optimizer, guard="skip")
    try:
        for step in range(8):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x[step]), y[step])
            loss.backward()
            attached.add_loss(loss)
            optimizer.step()
            attached.step()
        assert [s.step for s in attached.monitor.skipped_steps] == [3]
    finally:
        attached.monitor.close()
