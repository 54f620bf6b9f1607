"""DROPOUT_IGNORES_EVAL: dropout that model.eval() does not switch off (F.dropout without
training=self.training, a flag of the model's own) is named where it is made; deterministic
evaluation passes and other randomness stay quiet; the replays leave no trace."""
import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics import Monitor
from diagnostics.monitor.probes.eval_randomness import (MAX_CHECKS, differs, dropout_signature,
                                                        first_difference)
from tests.diagnostics.monitor_nets import CLASSES, FEATURES, batches, frameworks, teacher_data
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)
from tests.support.hooks import hook_state

pytestmark = pytest.mark.usefixtures("one_torch_thread")
FRAMEWORKS = frameworks()
TORCH = FRAMEWORKS[0]
STEPS, EPOCH = 12, 4
CODE = "DROPOUT_IGNORES_EVAL"


def _net(fw, kind, p=0.3):
    """A Linear-BatchNorm-ReLU-(dropout)-Linear net whose dropout is ``kind``: "functional"
    (F.dropout without training=, the bug) or "functional_fixed"; "own_flag" (switched by
    self.is_training, the bug) or "own_flag_fixed"; "module" (nn.Dropout); "noise" (additive
    Gaussian noise in every mode, as a VAE samples its latent); "none"."""
    nn, F, module = fw.nn, fw.F, fw.module
    fw.seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = nn.Linear(FEATURES, 32)
            self.norm = nn.BatchNorm1d(32)
            self.drop = nn.Dropout(p)
            self.out = nn.Linear(32, CLASSES)
            self.is_training = True

        def forward(self, x):
            h = F.relu(self.norm(self.hidden(x)))
            if kind == "functional":
                h = F.dropout(h, p)
            elif kind == "functional_fixed":
                h = F.dropout(h, p, training=self.training)
            elif kind in ("own_flag", "own_flag_fixed"):
                if self.is_training if kind == "own_flag" else self.training:
                    h = h * (module.rand(*h.shape) > p).float() / (1 - p)
            elif kind == "module":
                h = self.drop(h)
            elif kind == "noise":
                h = h + 0.5 * module.randn(*h.shape)
            return self.out(h)
    return Net()


def _train(fw, model, *, steps=STEPS, every=1, evaluate=None):
    """Train, and after every EPOCH steps an evaluation pass under no_grad after model.eval()
    (``evaluate(model, x)`` instead when given), then model.train(). The findings, the
    evaluation outputs and the probe's signal."""
    x, y = teacher_data(0)
    optimizer = fw.optim.Adam(model.parameters(), lr=1e-3)
    outputs = []
    with Monitor(model, optimizer, every=every) as monitor:
        for step, (xb, yb) in enumerate(batches(x, y, steps=steps, batch=32)):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            if (step + 1) % EPOCH == 0:
                model.eval()
                with fw.no_grad():
                    out = (evaluate or (lambda m, v: m(v)))(model, fw.inputs(x[:64]))
                outputs.append(np.array(out.data if fw.name == "minigrad" else out.numpy()))
                model.train()
        report = monitor.report()
    found = [f for f in report.findings if f.code == CODE]
    return found, outputs, report.findings, _signal(monitor)


def _signal(monitor):
    probe = next(p for p in monitor._probes if type(p).__name__ == "EvalRandomnessProbe")
    return dataclasses.asdict(next(iter(probe.signals())))   # EvalRandomness, as a dict


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
@pytest.mark.parametrize("kind", ["functional", "own_flag"])
def test_dropout_left_on_in_eval_is_named_in_the_models_forward(fw, kind):
    found, _, _, signal = _train(fw, _net(fw, kind, p=0.3))
    assert [f.severity for f in found] == ["warning"]
    finding = found[0]
    assert finding.location is None           # the model's own forward: no module to name
    evidence = finding.evidence
    if fw.name == "torch":                    # the operation that drops
        tensor = {"functional": "F.dropout", "own_flag": "Tensor.mul"}[kind]
        assert (evidence["kind"], evidence["tensor"]) == ("op", tensor)
        assert f"the output of {tensor} had" in finding.message
    else:                                     # minigrad: the next module's input
        assert (evidence["kind"], evidence["tensor"]) == ("input", "out")
        assert "the input of 'out' (Linear) had" in finding.message
    assert evidence["origin"] == "" and 0.2 < evidence["rate"] < 0.4   # dropout's p, measured
    assert evidence["step"] == EPOCH and evidence["eval_pass"] == 1
    assert "the forward of the model itself (Net), whose .training is False" in finding.message
    assert "training=self.training to F.dropout" in finding.suggestion
    assert signal["checks"] == 1 and signal["error"] is None   # the 1st of 3 passes


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
@pytest.mark.parametrize("kind", ["functional_fixed", "own_flag_fixed", "module", "none"])
def test_deterministic_evaluation_passes_stay_quiet(fw, kind):
    found, _, findings, signal = _train(fw, _net(fw, kind))
    assert found == [] and signal["checks"] >= 1 and signal["last"] is None
    assert not [f for f in findings if f.severity != "info"]


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
def test_additive_noise_in_eval_is_not_dropout(fw):
    """A VAE samples its latent in eval mode too: random, but not dropout's mark."""
    found, _, findings, signal = _train(fw, _net(fw, "noise"))
    assert found == [] and [f.code for f in findings if f.severity != "info"] == []
    last = signal["last"]
    assert last is not None and last["dropout"] is None


@pytest.mark.parametrize("context", ["inference_mode", "autocast_bf16"])
def test_evaluation_under_inference_mode_or_autocast(context):
    def evaluate(model, x):
        if context == "inference_mode":
            with torch.inference_mode():
                return model(x).clone()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(x).float()
    found, _, _, _ = _train(TORCH, _net(TORCH, "functional"), evaluate=evaluate)
    assert [f.evidence["tensor"] for f in found] == ["F.dropout"]
    for kind in ("functional_fixed", "noise"):
        assert _train(TORCH, _net(TORCH, kind), evaluate=evaluate)[0] == []


def test_a_dropout_module_of_its_own_is_named_at_the_module():
    nn = torch.nn

    class MyDropout(nn.Module):
        """d2l's from-scratch dropout as a module, switched by its own flag."""

        def __init__(self, p):
            super().__init__()
            self.p, self.is_training = p, True

        def forward(self, x):
            if not self.is_training:
                return x
            return x * (torch.rand_like(x) > self.p).float() / (1 - self.p)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), MyDropout(0.5),
                          nn.Linear(32, CLASSES))
    found, _, _, _ = _train(TORCH, model)
    assert len(found) == 1 and found[0].location == "2"
    assert found[0].evidence["tensor"] == "Tensor.mul" and 0.4 < found[0].evidence["rate"] < 0.6
    assert "in the forward of '2' (MyDropout), whose .training is False" in found[0].message


def test_monte_carlo_dropout_switched_on_with_train_is_quiet():
    """Dropout modules put back in train mode after model.eval() (MC dropout) are in train
    mode on purpose: neither this check nor TRAIN_MODE_AT_EVAL (which names a model left in
    training mode) raises."""
    def evaluate(model, x):
        model.drop.train()
        return model(x)
    found, _, findings, signal = _train(TORCH, _net(TORCH, "module", p=0.5), evaluate=evaluate)
    assert found == [] and signal["last"]["origin"] == "drop"
    assert "TRAIN_MODE_AT_EVAL" not in [f.code for f in findings]


def test_the_evaluation_outputs_and_the_random_stream_are_as_without_the_monitor():
    """With the bug the evaluation outputs depend on the random stream: two extra forwards that
    drew from it would change them, and the training after them."""
    def plain():
        model = _net(TORCH, "functional", p=0.5)
        x, y = teacher_data(0)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        outputs = []
        for step, (xb, yb) in enumerate(batches(x, y, steps=STEPS, batch=32)):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(TORCH.inputs(xb)), TORCH.labels(yb))
            loss.backward()
            optimizer.step()
            if (step + 1) % EPOCH == 0:
                model.eval()
                with torch.no_grad():
                    outputs.append(model(TORCH.inputs(x[:64])).numpy())
                model.train()
        return outputs, model.state_dict(), torch.rand(4)

    outputs, state, after = plain()
    model = _net(TORCH, "functional", p=0.5)
    found, monitored, _, _ = _train(TORCH, model)
    assert found
    assert all(np.array_equal(a, b) for a, b in zip(outputs, monitored, strict=True))
    assert all(torch.equal(state[k], model.state_dict()[k]) for k in state)
    assert torch.equal(torch.rand(4), after)


def test_the_replays_leave_no_hook_and_the_users_hooks_see_no_extra_call():
    model = _net(TORCH, "functional")
    calls = []
    handle = model.out.register_forward_hook(lambda *_: calls.append(1))
    before = hook_state(model)
    _train(TORCH, model)
    assert hook_state(model) == before
    handle.remove()
    assert len(calls) == STEPS + STEPS // EPOCH   # the training and evaluation calls only


def test_buffers_changed_by_an_evaluation_forward_are_put_back():
    nn = torch.nn

    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(FEATURES, CLASSES)
            self.register_buffer("seen", torch.zeros(()))

        def forward(self, x):
            self.seen += 1
            return self.fc(x)

    torch.manual_seed(0)
    model = Counting()
    _train(TORCH, model)
    assert model.seen.item() == STEPS + STEPS // EPOCH


def test_a_forward_that_fails_on_the_replay_does_not_stop_training():
    """The model insists on being given the very tensor its user pinned (a copy is refused)."""
    nn = torch.nn

    class Pinned(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(FEATURES, CLASSES)
            self.pinned = None

        def forward(self, x):
            if not self.training and x is not self.pinned:
                raise RuntimeError("evaluate on the pinned buffer")
            return self.fc(x)

    def evaluate(model, x):
        model.pinned = x
        return model(x)

    torch.manual_seed(0)
    model = Pinned()
    before = hook_state(model)
    found, outputs, findings, signal = _train(TORCH, model, evaluate=evaluate)
    assert found == [] and len(outputs) == STEPS // EPOCH
    assert signal["checks"] == 1 and "evaluate on the pinned buffer" in signal["error"]
    assert not [f for f in findings if f.code == "MONITOR_ERROR"]
    assert hook_state(model) == before


def test_passes_whose_arguments_a_replay_could_change_are_not_replayed():
    nn = torch.nn

    class Cached(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(FEATURES, CLASSES)

        def forward(self, x, cache=None):
            if cache is not None:
                cache.keys.append(x)
            return torch.nn.functional.dropout(self.fc(x), 0.5)

    class Cache:          # as a KV cache: an object the forward appends to
        def __init__(self):
            self.keys = []

    torch.manual_seed(0)
    model = Cached()
    cache = Cache()
    found, _, _, signal = _train(TORCH, model, evaluate=lambda m, x: m(x, cache=cache))
    assert found == [] and signal["checks"] == 0 and len(cache.keys) == STEPS // EPOCH


def test_at_most_a_few_passes_are_replayed_and_none_in_training():
    """The 1st, 10th and 100th of 120 evaluation passes, two forwards each; none in training."""
    model = _net(TORCH, "functional")
    calls, forward = [], model.hidden.forward

    def counted(x):
        calls.append(torch.is_grad_enabled())
        return forward(x)
    model.hidden.forward = counted
    found, _, _, signal = _train(TORCH, model, evaluate=lambda m, x: [m(x) for _ in range(40)][-1])
    assert found and signal["passes"] == 120 and signal["checks"] == 3 <= MAX_CHECKS
    assert calls.count(True) == STEPS and calls.count(False) == 120 + 2 * 3


def test_a_compiled_model_is_replayed_underneath():
    model = _net(TORCH, "functional")
    compiled = torch.compile(model, backend="eager")
    found, _, _, _ = _train(TORCH, compiled)
    assert len(found) == 1 and found[0].location is None
    assert found[0].evidence["tensor"] == "F.dropout"


def test_dropout_inside_a_block_is_named_at_the_block():
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(32, 32)

        def forward(self, x):
            return x + F.dropout(F.relu(self.fc(x)), 0.2)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 32), Block(), Block(), nn.Linear(32, CLASSES))
    found, _, _, _ = _train(TORCH, model)
    assert len(found) == 1 and found[0].location == "1"       # the first block
    assert found[0].evidence["tensor"] == "F.dropout"


# ------------------------------------------------------------------ the signature itself
@settings(max_examples=60, deadline=None)
@given(p=st.floats(0.05, 0.9), size=st.integers(64, 4096), seed=st.integers(0, 2**32 - 1),
       relu=st.booleans())
def test_dropout_masks_have_the_signature_with_their_rate(p, size, seed, relu):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(size)
    if relu:
        x = np.maximum(x, 0)
    a = x * (rng.random(size) >= p) / (1 - p)
    b = x * (rng.random(size) >= p) / (1 - p)
    found = dropout_signature(a, b)
    nonzero = np.count_nonzero(x)
    if found is None:      # only when too few elements were dropped, or kept, to tell
        assert min(nonzero * p, nonzero * (1 - p) ** 2) < 40
    else:
        assert abs(found["rate"] - p) < 4 * np.sqrt(p * (1 - p) / nonzero) + 0.01
        assert found["scale"] == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(size=st.integers(8, 4096), seed=st.integers(0, 2**32 - 1),
       noise=st.sampled_from(["additive", "relu_additive", "multiplicative", "one_hot"]))
def test_other_randomness_has_no_dropout_signature(size, seed, noise):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(size)
    if noise == "one_hot":
        rows = max(size // 4, 2)
        a, b = (np.eye(4)[rng.integers(0, 4, rows)].reshape(-1) for _ in range(2))
    elif noise == "multiplicative":
        a, b = (x * (1 + 0.1 * rng.standard_normal(size)) for _ in range(2))
    else:
        a, b = (x + 0.3 * rng.standard_normal(size) for _ in range(2))
        if noise == "relu_additive":
            a, b = np.maximum(a, 0), np.maximum(b, 0)
    assert dropout_signature(a, b) is None


def test_rounding_differences_do_not_count_as_differing():
    x = np.random.default_rng(0).standard_normal(1000)
    assert not differs(x, x * (1 + 1e-6))
    assert differs(x, x + 0.1)
    assert differs(x, np.where(np.arange(1000) % 10 == 0, 0.0, x))


def test_the_first_difference_is_made_by_the_caller_or_the_module_itself():
    same, other = np.ones(64), np.arange(64.0)
    run = [("input", "", (64,), same, None), ("input", "a", (64,), same, None),
           ("output", "a", (64,), same, None), ("input", "b", (64,), same, None),
           ("output", "b", (64,), same, None), ("output", "", (64,), same, None)]
    changed_input = list(run)
    changed_input[3] = ("input", "b", (64,), other, None)
    assert first_difference(run, changed_input).origin == ""
    changed_output = list(run)
    changed_output[2] = ("output", "a", (64,), other, None)
    assert first_difference(run, changed_output).origin == "a"
    assert first_difference(run, run) is None
    assert first_difference(run, run[:1] + [("input", "c", (64,), same, None)]).origin is None
