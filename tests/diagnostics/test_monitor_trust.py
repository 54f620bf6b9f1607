"""Issue 25 on the Monitor: no crash in the user's loop, and no false alarm on healthy code
that merely looks unusual (a custom backward returning None, a zero-initialised LoRA ``B``,
frames the model divides by 255 itself, a GradScaler the Monitor was not told about)."""
import numpy as np
import pytest
import torch

import minigrad
from diagnostics import Monitor
from diagnostics.errors import DiagnosticsError
from diagnostics.monitor.probes.gradients import GradientsProbe
from tests.diagnostics.monitor_nets import (FEATURES, Framework, batches, frameworks, mlp,
                                            one_torch_thread, teacher_data)  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(params=frameworks(), ids=lambda fw: fw.name)
def fw(request):
    return request.param


def _loop(fw, model, optimizer, *, steps, monitor_options=None, scale=1.0, seed=0):
    x, y = teacher_data(seed)
    options = {"every": 1}
    options.update(monitor_options or {})
    with Monitor(model, optimizer, **options) as monitor:
        for xb, yb in batches(x, y, steps=steps, seed=seed):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb * scale)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    return monitor


# ------------------------------------------------------ a backward that returns None
class _ProjectNoWeightGradient(torch.autograd.Function):
    """x @ w.T whose backward gives w no gradient (None): legal in torch."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, grad):
        (w,) = ctx.saved_tensors
        return grad @ w, None


class _NoGradientHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(FEATURES, 32)
        self.head = torch.nn.Parameter(torch.randn(4, 32) * 0.1)

    def forward(self, x):
        return _ProjectNoWeightGradient.apply(torch.relu(self.body(x)), self.head)


def test_a_backward_returning_none_for_a_weight_does_not_reach_the_loop():
    torch.manual_seed(0)
    model = _NoGradientHead()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    alerts = []
    monitor = _loop(Framework("torch", torch), model, optimizer, steps=6,
                    monitor_options={"on_finding": alerts.append})
    report = monitor.report()
    assert report.history.steps == 6
    assert "MONITOR_ERROR" not in report.codes() and not any(
        a.code == "MONITOR_ERROR" for a in alerts)
    assert model.head.grad is None          # the Monitor took the None as no gradient
    assert not model.head._backward_hooks   # and left no hook behind


def test_a_minigrad_backward_returning_none_runs_under_the_monitor():
    from minigrad.function import Function

    class ProjectNoWeightGradient(Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(w)
            return x @ w.T

        @staticmethod
        def backward(ctx, grad):
            (w,) = ctx.saved_tensors
            return grad @ w, None

    nn = minigrad.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(FEATURES, 32)
            self.head = nn.Parameter(minigrad.tensor(
                np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32) * 0.1))

        def forward(self, x):
            return ProjectNoWeightGradient.apply(minigrad.functional.relu(self.body(x)),
                                                 self.head)

    model = Net()
    optimizer = minigrad.optim.Adam(model.parameters(), lr=1e-3)
    report = _loop(Framework("minigrad", minigrad), model, optimizer, steps=6).report()
    assert report.history.steps == 6 and "MONITOR_ERROR" not in report.codes()


def test_a_gradient_hook_that_raises_is_quoted_not_raised(fw, monkeypatch):
    def broken(self, sample, param, grad):
        raise AttributeError("'NoneType' object has no attribute 'requires_grad'")
    monkeypatch.setattr(GradientsProbe, "_receive", broken)
    fw.seed(0)
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    alerts = []
    monitor = _loop(fw, model, optimizer, steps=5, monitor_options={"on_finding": alerts.append})
    errors = [a for a in alerts if a.code == "MONITOR_ERROR"]
    assert len(errors) == 1 and "GradientsProbe (hook)" in errors[0].message
    assert "requires_grad" in errors[0].message
    assert not any(isinstance(p, GradientsProbe) for p in monitor._probes)
    assert monitor.report().history.steps == 5     # the rest of the Monitor went on
    assert not model[0].weight._hooks if fw.name == "minigrad" else not (
        model[0].weight._backward_hooks)


def test_a_forward_hook_that_raises_is_quoted_not_raised(fw, monkeypatch):
    from diagnostics.monitor.probes.activations import ActivationsProbe

    def broken(self, *args):
        raise RuntimeError("a layer output of an unexpected kind")
    monkeypatch.setattr(ActivationsProbe, "_hook", lambda self, layer: broken.__get__(self))
    fw.seed(0)
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    monitor = _loop(fw, model, optimizer, steps=4)
    errors = [f for f in monitor.report().findings if f.code == "MONITOR_ERROR"]
    assert len(errors) == 1
    assert "ActivationsProbe (hook)" in errors[0].message


# ------------------------------------------------------------ a model without parameters
def test_a_model_without_parameters_is_refused_naming_the_argument(fw):
    model = fw.nn.Sequential(fw.nn.ReLU(), fw.nn.Flatten())
    with pytest.raises(DiagnosticsError, match=r"^model: .*parameters.*Sequential that has none"):
        Monitor(model)


def test_a_model_with_frozen_parameters_only_is_still_watched(fw):
    model = mlp(fw, [FEATURES, 4])
    for param in model.parameters():
        param.requires_grad_(False)
    with Monitor(model) as monitor:
        model(fw.inputs(np.zeros((2, FEATURES))))
        monitor.step(0.0)
    assert monitor.report().history.steps == 1


# -------------------------------------------------------- a finding about no one place
def test_a_model_wide_finding_reads_without_none(fw):
    """PARAMS_NOT_UPDATING for every parameter has no one place (location None): the line
    an on_finding callback prints, and its place in words, say so without "None"."""
    fw.seed(0)
    model, other = mlp(fw, [FEATURES, 16, 4]), mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(other.parameters(), lr=0.1)
    lines, (x, y) = [], teacher_data(0)
    with Monitor(model, optimizer, every=1,
                 on_finding=lambda f: lines.append((str(f), f"{f.code} {f.where}"))) as monitor:
        for xb, yb in batches(x, y, steps=12):
            model.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
        monitor.report()            # runs every check: its findings reach on_finding too
    found = [line for line in lines if "PARAMS_NOT_UPDATING" in line[0]]
    assert found and found[0][1] == "PARAMS_NOT_UPDATING model-wide"
    assert all("None" not in text for pair in lines for text in pair)


# --------------------------------------------------------- frames the model divides by 255
def _frames(seed, n=256):
    """0..255 "frames" of FEATURES pixels and learnable labels (from the scaled pixels)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (n, FEATURES)).astype(np.float32)
    y = ((x / 255.0 - 0.5) @ rng.standard_normal((FEATURES, 4))).argmax(axis=1)
    return x, y


def _scaling_net(fw, how):
    nn = fw.nn

    class Standardize(nn.Module):            # a Normalize-like first module, no parameters
        def forward(self, x):
            return (x / 255.0 - 0.5) / 0.25

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.prep = Standardize()
            self.fc1 = nn.Linear(FEATURES, 32)
            self.act = nn.ReLU()
            self.fc2 = nn.Linear(32, 4)

        def forward(self, x):
            if how == "divide":
                x = x / 255.0
            elif how == "module":
                x = self.prep(x)
            return self.fc2(self.act(self.fc1(x)))
    return Net()


def _frames_report(fw, how):
    fw.seed(0)
    model = _scaling_net(fw, how)
    optimizer = fw.optim.SGD(model.parameters(), lr=0.05)
    x, y = _frames(0)
    with Monitor(model, optimizer, every=1) as monitor:
        for xb, yb in batches(x, y, steps=8):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    return monitor.report()


@pytest.mark.parametrize("how", ["divide", "module"])
def test_frames_the_model_scales_itself_are_not_unnormalized(fw, how):
    assert "UNNORMALIZED_INPUT" not in _frames_report(fw, how).codes()


def test_raw_frames_into_the_first_linear_are_still_unnormalized(fw):
    report = _frames_report(fw, "raw")
    finding = next(f for f in report.findings if f.code == "UNNORMALIZED_INPUT")
    assert finding.evidence["layer"] == "fc1" and "layer fc1" in finding.message
    assert finding.evidence["max"] > 200


# ------------------------------------------------------ a GradScaler not passed to the Monitor
def _scaled_run(*, inputs_scale=1.0, autocast=False, seeds=(0, 1, 2), steps=12):
    reports = []
    for seed in seeds:
        torch.manual_seed(seed)
        model = mlp(Framework("torch", torch), [FEATURES, 32, 4])
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        scaler = torch.amp.GradScaler("cpu")          # scale 65536, as on a GPU
        x, y = teacher_data(seed)
        with Monitor(model, optimizer, every=1) as monitor:
            for xb, yb in batches(x, y, steps=steps, seed=seed):
                optimizer.zero_grad()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                    loss = torch.nn.functional.cross_entropy(
                        model(torch.tensor(xb * inputs_scale)), torch.tensor(yb))
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                monitor.step(loss)
        reports.append((monitor, monitor.report()))
    return reports


@pytest.mark.parametrize("autocast", [False, True], ids=["float32", "bf16-autocast"])
def test_gradients_of_an_unnamed_grad_scaler_are_judged_unscaled(autocast):
    original = torch.amp.GradScaler.__dict__["scale"]
    for monitor, report in _scaled_run(autocast=autocast):
        assert "EXPLODING_GRADIENTS" not in report.codes()
        assert "MONITOR_ERROR" not in report.codes()
        assert np.nanmax(monitor.history.column("gradient_norm")) < 100   # not 65536x
        assert report.mixed_precision["scaler_found"] is True
    assert torch.amp.GradScaler.__dict__["scale"] is original      # the patch came off


def test_a_real_explosion_under_an_unnamed_grad_scaler_is_still_caught():
    for monitor, report in _scaled_run(inputs_scale=1e5, seeds=(0, 1)):
        finding = next(f for f in report.findings if f.code == "EXPLODING_GRADIENTS")
        assert finding.evidence["gradient_norm"] > 1e4


def test_a_grad_scaler_of_another_model_is_not_taken_for_this_ones():
    torch.manual_seed(0)
    model, other = (mlp(Framework("torch", torch), [FEATURES, 16, 4]) for _ in range(2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")
    x = torch.randn(32, FEATURES)
    with Monitor(model, optimizer, every=1) as monitor:
        for _ in range(3):
            optimizer.zero_grad()
            scaler.scale(other(x).pow(2).mean())       # another model's loss, scaled
            loss = model(x).pow(2).mean()
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    assert monitor._ctx.scaler is None and not monitor.report().mixed_precision


# ------------------------------------------------------------ a zero-initialised LoRA B
def _lora_net(fw, *, rank=4, width=32):
    """A frozen base Linear with a LoRA adapter: A (rank x in, kaiming), B (out x rank, 0)."""
    nn = fw.nn

    class LoRALinear(nn.Module):
        def __init__(self, fan_in, fan_out):
            super().__init__()
            self.base = nn.Linear(fan_in, fan_out)
            for param in self.base.parameters():
                param.requires_grad_(False)
            self.lora_A = nn.Linear(fan_in, rank, bias=False)     # kaiming-uniform
            self.lora_B = nn.Linear(rank, fan_out, bias=False)
            self.lora_B.weight.data[...] = 0                      # the usual LoRA init

        def forward(self, x):
            return self.base(x) + self.lora_B(self.lora_A(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = LoRALinear(FEATURES, width)
            self.act = nn.ReLU()
            self.fc2 = LoRALinear(width, 4)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))
    return Net()


@pytest.mark.parametrize("lr", [1e-2, 1e-5])
def test_a_zero_initialised_lora_b_is_not_vanishing_gradients(fw, lr):
    for seed in (0, 1, 2):
        fw.seed(seed)
        model = _lora_net(fw)
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = fw.optim.Adam(trainable, lr=lr)
        x, y = teacher_data(seed)
        with Monitor(model, optimizer, every=1) as monitor:
            losses = []
            for xb, yb in batches(x, y, steps=30, seed=seed):
                optimizer.zero_grad()
                loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
                loss.backward()
                optimizer.step()
                monitor.step(loss)
                losses.append(float(loss.item()))
        report = monitor.report()
        assert "VANISHING_GRADIENTS" not in report.codes()
        assert not [f for f in report.resolved if f.code == "VANISHING_GRADIENTS"]
        if lr == 1e-2:
            assert np.mean(losses[-5:]) < np.mean(losses[:5])          # it trains


@pytest.mark.parametrize("zero_head", [False, True], ids=["plain", "zero-initialised-head"])
def test_a_deep_sigmoid_stack_still_vanishes_also_behind_a_zero_initialised_head(fw, zero_head):
    """A zero head explains nothing once it has moved: the gradient, scaled to the head at a
    usual size, is still starved at the first layer."""
    for seed in (0, 1):
        fw.seed(seed)
        layers = []
        for _ in range(12):
            layers += [fw.nn.Linear(32, 32), fw.nn.Sigmoid()]
        model = fw.nn.Sequential(*layers, fw.nn.Linear(32, 4))
        if zero_head:
            model[-1].weight.data[...] = 0
        optimizer = fw.optim.Adam(model.parameters(), lr=1e-3)
        rng = np.random.default_rng(seed)
        x, y = rng.standard_normal((64, 32)), rng.integers(0, 4, 64)
        with Monitor(model, optimizer, every=1) as monitor:
            for _ in range(10):
                optimizer.zero_grad()
                loss = fw.F.cross_entropy(model(fw.inputs(x)), fw.labels(y))
                loss.backward()
                optimizer.step()
                monitor.step(loss)
        found = [f for f in monitor.report().findings if f.code == "VANISHING_GRADIENTS"]
        assert len(found) == 1 and found[0].location == "0"
