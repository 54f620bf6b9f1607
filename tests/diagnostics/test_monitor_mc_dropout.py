"""DROPOUT_IGNORES_EVAL and what the user asked for: Monte Carlo dropout (a training flag
written in the call, dropout modules switched on with .train() after model.eval()) stays
quiet, the default training=True left implicit is still named; and the replays leave the
user's own random generators as they found them."""
import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from diagnostics import Monitor
from tests.diagnostics.monitor_nets import (
    CLASSES,
    FEATURES,
    batches,
    one_torch_thread,  # noqa: F401 (a fixture)
    teacher_data,
)
from tests.diagnostics.test_monitor_eval_randomness import CODE, EPOCH, STEPS, TORCH, _train

pytestmark = pytest.mark.usefixtures("one_torch_thread")
P = 0.3


def _one(training):
    """A stand-in for another call on the same line that does take ``training=``."""
    return 1.0


class Dropping(nn.Module):
    """Linear-ReLU, a dropout written as ``form``, Linear. The forms that drop at evaluation
    on purpose (Monte Carlo dropout) write their training flag; the "implicit" ones are the
    bug."""

    def __init__(self, form):
        super().__init__()
        self.hidden = nn.Linear(FEATURES, 32)
        self.out = nn.Linear(32, CLASSES)
        self.form, self.mc = form, True

    def forward(self, x):
        h, form = F.relu(self.hidden(x)), self.form
        if form == "keyword":
            h = F.dropout(h, P, training=True)
        elif form == "positional":
            h = F.dropout(h, P, True)
        elif form == "own_attribute":
            h = F.dropout(h, p=P, training=self.mc)
        elif form == "multiline":
            h = F.dropout(
                h,
                P,
                training=True,
            )
        elif form == "feature_2d":
            h = F.dropout2d(h[:, :, None, None], P, training=True).flatten(1)
        elif form == "alpha":
            h = F.alpha_dropout(h, P, training=True)
        elif form == "torch_dropout":
            h = torch.dropout(h, P, True)
        elif form == "implicit":
            h = F.dropout(h, p=P)
        elif form == "implicit_2d":
            h = F.dropout2d(h[:, :, None, None], P).flatten(1)
        elif form == "implicit_next_to_a_written_flag":
            h = F.dropout(h, P) * _one(training=True)
        elif form == "module_made_in_forward":
            h = nn.Dropout(P)(h)
        return self.out(h)


def _model(form):
    torch.manual_seed(0)
    return Dropping(form)


@pytest.mark.parametrize("form", ["keyword", "positional", "own_attribute", "multiline",
                                  "feature_2d", "alpha", "torch_dropout"])
def test_dropout_with_its_training_flag_written_is_deliberate(form):
    found, _, findings, signal = _train(TORCH, _model(form))
    assert found == [] and not [f for f in findings if f.severity != "info"]
    last = signal["last"]
    assert last["deliberate"] == "training flag written in the call", last
    assert last["kind"] == "op" and last["origin"] == ""


@pytest.mark.parametrize("form", ["implicit", "implicit_2d", "implicit_next_to_a_written_flag",
                                  "module_made_in_forward"])
def test_dropout_left_to_its_default_is_still_named(form):
    found, _, _, signal = _train(TORCH, _model(form))
    assert [f.code for f in found] == [CODE], signal
    assert signal["last"]["deliberate"] is None
    tensor = {"implicit_2d": "F.dropout2d"}.get(form, "F.dropout")
    assert found[0].evidence["tensor"] == tensor and found[0].location is None
    assert "write training=True in the call" in found[0].suggestion


def test_monte_carlo_dropout_switched_on_module_by_module_is_quiet():
    """The common recipe: model.eval(), then every nn.Dropout back in train mode."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Dropout(P), nn.Linear(32, 32),
                          nn.ReLU(), nn.Dropout(P), nn.Linear(32, CLASSES))

    def evaluate(model, x):
        for module in model.modules():
            if isinstance(module, nn.Dropout):
                module.train()
        return model(x)
    found, _, findings, signal = _train(TORCH, model, evaluate=evaluate)
    assert found == [] and not [f for f in findings if f.severity != "info"]
    last = signal["last"]
    assert last["origin"] == "2" and last["origin_training"] and last["dropout"] is not None
    assert last["deliberate"].startswith("module in train mode")


def test_a_dropout_module_in_eval_mode_beside_implicit_f_dropout_is_named():
    """nn.Dropout passes its own .training to F.dropout: the module's mode decides, not the
    argument torch's code writes."""
    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = nn.Linear(FEATURES, 32)
            self.drop = nn.Dropout(P)
            self.out = nn.Linear(32, CLASSES)

        def forward(self, x):
            return self.out(F.dropout(self.drop(F.relu(self.hidden(x))), P))
    torch.manual_seed(0)
    found = _train(TORCH, Mixed())[0]
    assert [f.evidence["tensor"] for f in found] == ["F.dropout"] and found[0].location is None


# ------------------------------------------------------------- the user's own generators
class PrivateNoise(nn.Module):
    """Noise injection in every mode drawn from generators of the model's own: a torch
    generator held as an attribute, one held elsewhere (handed over at each call) and a
    NumPy one."""

    def __init__(self, elsewhere):
        super().__init__()
        self.hidden = nn.Linear(FEATURES, 32)
        self.out = nn.Linear(32, CLASSES)
        self.gen = torch.Generator().manual_seed(1)
        self.rng = np.random.default_rng(2)
        self.elsewhere = elsewhere   # a function returning the generator: no attribute holds it

    def forward(self, x):
        h = F.relu(self.hidden(x))
        h = h + 0.1 * torch.randn(h.shape, generator=self.gen)
        h = h * torch.bernoulli(torch.full_like(h, 0.9), generator=self.elsewhere()) / 0.9
        h = h + torch.from_numpy(self.rng.standard_normal(h.shape).astype(np.float32))
        return self.out(h)


def _noisy_run(monitored):
    """Evaluation outputs of a model drawing from private generators, with or without the
    Monitor, and the generators' states at the end."""
    torch.manual_seed(0)
    hidden_generator = torch.Generator().manual_seed(3)
    model = PrivateNoise(lambda: hidden_generator)
    if monitored:
        _, outputs, _, signal = _train(TORCH, model)
        assert signal["checks"] == 1 and signal["error"] is None
        assert signal["last"] is not None          # the replays did draw: they differ
    else:
        outputs = _plain(model)
    return outputs, (model.gen.get_state(), hidden_generator.get_state(),
                     model.rng.bit_generator.state)


def _plain(model):
    """``_train``'s loop without the Monitor: the evaluation outputs."""
    x, y = teacher_data(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    outputs = []
    for step, (xb, yb) in enumerate(batches(x, y, steps=STEPS, batch=32)):
        optimizer.zero_grad()
        F.cross_entropy(model(TORCH.inputs(xb)), TORCH.labels(yb)).backward()
        optimizer.step()
        if (step + 1) % EPOCH == 0:
            model.eval()
            with torch.no_grad():
                outputs.append(model(TORCH.inputs(x[:64])).numpy())
            model.train()
    return outputs


def test_the_replays_leave_the_users_own_generators_as_they_were():
    """Every evaluation pass, the checked one and those after it, bit-identical with and
    without the Monitor, and every private generator in the same state at the end."""
    plain, plain_states = _noisy_run(monitored=False)
    watched, watched_states = _noisy_run(monitored=True)
    assert len(plain) == len(watched) == STEPS // EPOCH
    assert all(np.array_equal(a, b) for a, b in zip(plain, watched))
    assert torch.equal(plain_states[0], watched_states[0])
    assert torch.equal(plain_states[1], watched_states[1])
    assert plain_states[2] == watched_states[2]


def test_the_compiled_models_replay_leaves_its_generators_as_they_were():
    """A compiled model is replayed eagerly on sampled training steps: the same rule."""
    def losses(monitored):
        torch.manual_seed(0)
        generator = torch.Generator().manual_seed(3)
        model = PrivateNoise(lambda: generator)
        compiled = torch.compile(model, backend="eager")
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        x, y = teacher_data(0)
        out = []
        monitor = Monitor(compiled, optimizer, every=2) if monitored else None
        for xb, yb in batches(x, y, steps=6, batch=32):
            optimizer.zero_grad()
            loss = F.cross_entropy(compiled(TORCH.inputs(xb)), TORCH.labels(yb))
            loss.backward()
            optimizer.step()
            if monitor is not None:
                monitor.step(loss)
            out.append(loss.item())
        if monitor is not None:
            monitor.close()
            replays = next(p for p in monitor._probes if hasattr(p, "replay_error")).replays
            assert replays >= 2            # the eager replays that drew from the generators
        return out, model.gen.get_state(), generator.get_state()
    plain, watched = losses(False), losses(True)
    assert plain[0] == watched[0]
    assert torch.equal(plain[1], watched[1]) and torch.equal(plain[2], watched[2])
