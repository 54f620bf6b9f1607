"""Hooks come and go, nothing in the model, optimizer or RNG changes, bad input is refused early,
statistics are right and reach the host in one transfer per sampled step."""
import json
import math
import random

import numpy as np
import pytest

import minigrad
from diagnostics import DiagnosticsError, Monitor
from diagnostics.backends import get_backend
from diagnostics.monitor import DEFAULT_EVERY, Thresholds
from diagnostics.monitor.kernels import kernels_for
from tests.diagnostics.monitor_nets import FEATURES, batches, frameworks, mlp, teacher_data
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)
from tests.support.hooks import hook_state

pytestmark = pytest.mark.usefixtures("one_torch_thread")
FRAMEWORKS = frameworks()


@pytest.fixture(params=FRAMEWORKS, ids=lambda fw: fw.name)
def fw(request):
    request.param.seed(0)
    return request.param


def dropout_net(fw):
    nn = fw.nn
    return nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 4))


def run(fw, model, optimizer, *, steps=6, monitor=None, eval_pass=True):
    x, y = teacher_data(0)
    for xb, yb in batches(x, y, steps=steps):
        optimizer.zero_grad()
        loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
        loss.backward()
        optimizer.step()
        if monitor is not None:
            monitor.step(loss)
        if eval_pass:
            model.eval()
            with fw.no_grad():
                model(fw.inputs(x[:8]))
            model.train()


def rng_states(fw):
    import torch

    states = {"numpy": np.random.get_state()[1].tolist(), "python": random.getstate()}
    states["framework"] = (torch.get_rng_state().tolist() if fw.name == "torch"
                           else minigrad.get_rng_state())
    return states


def to_array(value):
    """A NumPy copy of a torch tensor, a minigrad tensor or an ndarray."""
    if hasattr(value, "detach"):
        value = value.detach().numpy()
    return np.array(value, copy=True)


def parameters(model):
    return {name: to_array(p) for name, p in model.named_parameters()}


# ------------------------------------------------------------------ hooks
def test_close_removes_every_hook_and_is_idempotent(fw):
    model = dropout_net(fw)
    before = hook_state(model)
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    monitor = Monitor(model, optimizer, every=1)
    assert hook_state(model) != before
    run(fw, model, optimizer, monitor=monitor)
    monitor.close()
    assert hook_state(model) == before
    monitor.close()
    assert hook_state(model) == before
    assert monitor.report().steps == 6          # the report outlives the hooks


def test_an_exception_in_the_block_leaves_no_hook(fw):
    model = dropout_net(fw)
    before = hook_state(model)
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ZeroDivisionError):
        with Monitor(model, optimizer, every=1) as monitor:
            run(fw, model, optimizer, monitor=monitor, steps=2)
            model(fw.inputs(np.zeros((2, FEATURES))))     # mid-iteration: hooks armed
            1 / 0
    assert hook_state(model) == before


def test_hooks_are_attached_only_for_sampled_iterations(fw):
    model = mlp(fw, [FEATURES, 8, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    bare = hook_state(model)
    with Monitor(model, optimizer, every=4) as monitor:
        armed = []
        for step in range(9):
            armed.append(hook_state(model)["0"] != bare["0"])
            run(fw, model, optimizer, monitor=monitor, steps=1, eval_pass=False)
    assert armed == [True, True, False, False, True, False, False, False, True]
    assert monitor.history.column("step").tolist() == [0, 1, 4, 8]


# ----------------------------------------------------------- nothing lost
def test_monitored_training_is_bit_for_bit_the_same(fw):
    results = []
    for monitored in (False, True):
        fw.seed(3)
        np.random.seed(5)
        random.seed(5)
        model = dropout_net(fw)
        optimizer = fw.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        monitor = Monitor(model, optimizer, every=1) if monitored else None
        run(fw, model, optimizer, monitor=monitor)
        if monitor is not None:
            monitor.report()
            monitor.close()
        grads = {n: to_array(p.grad) for n, p in model.named_parameters()}
        results.append((parameters(model), grads, rng_states(fw), model.training,
                        {n: p.requires_grad for n, p in model.named_parameters()},
                        repr(optimizer.state_dict()["state"])))
    plain, monitored = results
    for name in plain[0]:
        assert np.array_equal(plain[0][name], monitored[0][name]), name
        assert np.array_equal(plain[1][name], monitored[1][name]), name
    assert plain[2:] == monitored[2:]


def test_no_item_call_per_statistic(monkeypatch):
    """The torch path brings numbers to the host in one transfer per sampled step."""
    import torch

    from diagnostics.backends.torch_backend import TorchBackend
    from diagnostics.monitor.kernels.torch_kernels import TorchKernels

    model = mlp(FRAMEWORKS[0], [FEATURES, 16, 16, 4])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    gathers = []
    original = TorchKernels.gather

    def counting_gather(self, results):
        gathers.append(len(results))
        return original(self, results)

    monkeypatch.setattr(TorchKernels, "gather", counting_gather)
    # as on an accelerator: a CPU loss is read at once (free there), a GPU one is not
    monkeypatch.setattr(TorchBackend, "on_host", lambda self, tensor: False)

    def refuse(*args):
        raise AssertionError("a per-number synchronisation")

    x, y = teacher_data(0)
    with Monitor(model, optimizer, every=3) as monitor:
        for xb, yb in batches(x, y, steps=10):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(torch.tensor(xb)), torch.tensor(yb))
            loss.backward()
            optimizer.step()
            with monkeypatch.context() as patch:
                patch.setattr(torch.Tensor, "item", refuse)
                patch.setattr(torch.Tensor, "__float__", refuse)
                patch.setattr(torch.Tensor, "tolist", refuse)
                monitor.step(loss)
    assert len(gathers) == 5                  # sampled steps 0, 1, 3, 6, 9
    assert min(gathers) > 10                  # each one carries many numbers


# ------------------------------------------------------------- bad input
def test_bad_arguments_are_refused_before_any_hook(fw):
    model = mlp(fw, [FEATURES, 8, 4])
    before = hook_state(model)
    cases = [
        (lambda: Monitor(object()), "model"),
        (lambda: Monitor(model, every=0), "every"),
        (lambda: Monitor(model, every=2.5), "every"),
        (lambda: Monitor(model, window=1), "window"),
        (lambda: Monitor(model, on_finding="print"), "on_finding"),
        (lambda: Monitor(model, sinks=[object()]), "sinks"),
        (lambda: Monitor(model, sinks=3), "sinks"),
        (lambda: Monitor(model, optimizer=[1, 2]), "optimizer"),
        (lambda: Monitor(model, thresholds={"dead_fraction": 0.5}), "thresholds"),
    ]
    for make, argument in cases:
        with pytest.raises(DiagnosticsError, match=argument):
            make()
    assert hook_state(model) == before


def test_numpy_integers_are_counts_like_ints(fw):
    """``every`` and ``window`` take NumPy integers, as every other count in diagnostics does."""
    model = mlp(fw, [FEATURES, 8, 4])
    with Monitor(model, every=np.int64(3), window=np.int32(5)) as monitor:
        assert (monitor.every, monitor.window) == (3, 5)
        assert type(monitor.every) is int and type(monitor.window) is int
    with pytest.raises(DiagnosticsError, match="every"):
        Monitor(model, every=np.int64(0))


def test_bad_losses_are_refused(fw):
    model = mlp(fw, [FEATURES, 8, 4])
    with Monitor(model, every=1) as monitor:
        with pytest.raises(DiagnosticsError, match="loss"):
            monitor.step("0.5")
        with pytest.raises(DiagnosticsError, match=r"shape \(2,\)"):
            monitor.step(fw.inputs(np.ones(2)))
        monitor.step(0.5)                       # a plain number is fine
    with pytest.raises(DiagnosticsError, match="closed"):
        monitor.step(0.5)


# ------------------------------------------------------------ statistics
def test_statistics_match_the_tensors(fw):
    model = mlp(fw, [FEATURES, 8, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    seen = {}

    def keep_first_output(module, args, output):
        seen.setdefault("relu", to_array(output))

    model[1].register_forward_hook(keep_first_output)
    x, y = teacher_data(0)
    with Monitor(model, optimizer, every=1) as monitor:
        optimizer.zero_grad()
        xb = x[:32]
        loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(y[:32]))
        loss.backward()
        grad = to_array(model[2].weight.grad).astype(np.float64)
        before = parameters(model)
        optimizer.step()
        after = parameters(model)
        monitor.step(loss)
        model(fw.inputs(xb))          # the next forward measures the update
        report = monitor.report()
    row = report.history.rows[0]
    relu = seen["relu"].astype(np.float64)
    assert row["activation/1/mean"] == pytest.approx(relu.mean(), rel=1e-5)
    assert row["activation/1/std"] == pytest.approx(relu.std(), rel=1e-4)
    assert row["activation/1/max"] == pytest.approx(relu.max())
    assert row["activation/1/min"] == 0.0
    assert row["activation/1/zeros"] == pytest.approx((relu == 0).mean())
    assert row["input/std"] == pytest.approx(xb.astype(np.float64).std(), rel=1e-4)
    assert row["gradient/2.weight/norm"] == pytest.approx(np.linalg.norm(grad), rel=1e-5)
    assert row["gradient/2.weight/abs_mean"] == pytest.approx(np.abs(grad).mean(), rel=1e-5)
    assert row["gradient/2.weight/max"] == pytest.approx(np.abs(grad).max(), rel=1e-6)
    assert row["loss"] == pytest.approx(float(to_array(loss)))
    delta = after["2.weight"].astype(np.float64) - before["2.weight"]
    ratio = np.linalg.norm(delta) / np.linalg.norm(after["2.weight"].astype(np.float64))
    summary = next(p for p in report.parameters if p.name == "2.weight")
    assert summary.update_ratio == pytest.approx(ratio, rel=1e-4)
    layer = next(layer for layer in report.layers if layer.name == "1")
    assert layer.units == 8 and layer.type_name == "ReLU"


def test_update_size_is_measured_on_a_sample_of_large_parameters(fw):
    backend = kernels_for(get_backend(mlp(fw, [FEATURES, 4])))
    values = np.arange(200_000, dtype=np.float32) / 1e5
    big = fw.inputs(values)
    before = backend.weight_sample(big)
    # 12,500 runs of 16 neighbours; every 13th run keeps 962 runs (<= 16,384 entries)
    assert tuple(before.shape) == (962, 16)
    kept = values.reshape(12_500, 16)[::13]
    delta, weight = backend.gather(list(backend.update_statistics(big, before)))
    assert delta == 0.0
    assert weight == pytest.approx(float(np.linalg.norm(kept.astype(np.float64))), rel=1e-5)
    small = fw.inputs(values[:1000])
    assert tuple(backend.weight_sample(small).shape) == (1000,)


def test_default_sampling_takes_the_first_two_steps_then_every_fiftieth():
    model = mlp(FRAMEWORKS[1], [FEATURES, 4])
    with Monitor(model) as monitor:
        for _ in range(120):
            monitor.step(1.0)
    assert DEFAULT_EVERY == 50
    assert monitor.history.column("step").tolist() == [0, 1, 50, 100]
    assert monitor.report().steps == 120


# --------------------------------------------------------------- loss rules
def feed(losses, *, every=1, window=10, thresholds=None):
    """A Monitor fed a synthetic loss curve (no model activity): tests of the loss rules."""
    model = mlp(FRAMEWORKS[1], [FEATURES, 4])
    with Monitor(model, every=every, window=window, thresholds=thresholds) as monitor:
        for value in losses:
            monitor.step(float(value))
    return monitor.report()


def test_loss_curves():
    steps = np.arange(120)
    falling = 2.0 * np.exp(-steps / 30) + 0.1
    assert feed(falling).passed
    zigzag = 1.0 + 0.6 * (steps % 2)                         # up, down, up, down ...
    assert "LOSS_OSCILLATING" in feed(zigzag).codes()
    assert "LOSS_PLATEAU" in feed(np.full(120, 0.9)).codes()
    rising = 0.5 * np.exp(steps / 40)
    assert "LOSS_DIVERGING" in feed(rising).codes()
    with_nan = falling.copy()
    with_nan[70:] = np.nan
    nan = next(f for f in feed(with_nan).findings if f.code == "NAN_LOSS")
    assert nan.evidence["step"] == 70
    assert nan.evidence["last_finite_loss"] == pytest.approx(falling[69])


def test_noisy_but_falling_loss_is_quiet():
    rng = np.random.default_rng(0)
    steps = np.arange(200)
    noisy = (1.5 * np.exp(-steps / 60) + 0.2) * rng.uniform(0.7, 1.3, 200)
    assert feed(noisy).passed


def test_thresholds_can_be_changed():
    flat = np.full(120, 0.9)
    assert "LOSS_PLATEAU" not in feed(flat, thresholds=Thresholds(loss_min_steps=500)).codes()


# ------------------------------------------------------------------ report
def test_report_is_readable_and_json_ready(fw):
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    monitor = Monitor(model, optimizer, every=2)
    run(fw, model, optimizer, monitor=monitor, steps=8)
    model(fw.inputs(np.zeros((4, FEATURES)))).sum().backward()   # no zero_grad before it
    monitor.step(0.0)
    monitor.close()
    report = monitor.report()
    text = str(report)
    assert text.startswith(f"gradhunt Monitor: {fw.name} Sequential, 9 steps")
    for part in ("loss ", "input ", "layers in model order", "parameters:", "0.weight",
                 "(16,)", "STALE_GRADIENTS", "try: call optimizer.zero_grad()"):
        assert part in text
    data = json.loads(json.dumps(report.to_dict()))
    assert data["steps"] == 9 and data["backend"] == fw.name
    assert len(data["history"]["losses"]) == 9
    assert data["history"]["columns"][:3] == ["step", "loss", "gradient_norm"]
    assert {f["code"] for f in data["findings"]} == set(report.codes())
    assert all(math.isfinite(row[0]) for row in data["history"]["rows"])


def test_an_oscillating_loss_is_not_also_a_plateau():
    # SGD lr=0.625 on the asymmetric bowl w**2 (w > 0), 4 w**2 (w < 0) from w=1: 1, 0.25, 1, ...
    weight, losses = 1.0, []
    for _ in range(300):
        losses.append(weight ** 2 if weight > 0 else 4 * weight ** 2)
        weight -= 0.625 * (2 * weight if weight > 0 else 8 * weight)
    codes = {f.code for f in feed(losses).findings}
    assert "LOSS_OSCILLATING" in codes
    assert "LOSS_PLATEAU" not in codes


def test_a_flat_loss_with_small_noise_is_a_plateau():
    noise = np.random.default_rng(0).normal(0.0, 0.002, 300)
    codes = {f.code for f in feed(1.0 + noise).findings}
    assert "LOSS_PLATEAU" in codes and "LOSS_OSCILLATING" not in codes


def test_units_are_watched_through_the_rows_of_linear_and_conv_weights_only():
    import torch

    from diagnostics.backends import get_backend
    from diagnostics.monitor.layout import Layout

    model = torch.nn.ModuleDict({
        "embed": torch.nn.Embedding(10, 4),             # rows are words, not units
        "up": torch.nn.ConvTranspose2d(4, 2, 3),       # (in, out, k, k): rows are inputs
        "conv": torch.nn.Conv2d(2, 3, 3, bias=False),
        "head": torch.nn.Linear(3, 2)})
    layout = Layout(get_backend(model))
    assert layout.unit_weights == ["conv.weight", "head.weight"]
    assert layout.unit_biases == {"head.weight": "head.bias"}
