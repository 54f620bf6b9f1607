"""The Monitor on models as people write them: compiled, a module called twice, dict and tuple
outputs, keyword inputs, a frozen backbone under no_grad. Each planted bug is caught and its
healthy twin stays quiet (issue 12, items 3 and 6)."""
import numpy as np
import pytest

from diagnostics import DiagnosticsError, Monitor
from diagnostics.backends import get_backend
from diagnostics.monitor.probes.inputs import input_tensor
from tests.diagnostics.monitor_nets import FEATURES, batches, frameworks, teacher_data
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
FRAMEWORKS = frameworks()
TORCH = FRAMEWORKS[0]


@pytest.fixture(params=FRAMEWORKS, ids=lambda fw: fw.name)
def fw(request):
    request.param.seed(0)
    return request.param


def alarms(report):
    return [(f.code, f.location) for f in report.findings if f.severity != "info"]


def run(fw, model, *, steps=40, lr=3e-3, optimizer=None, every=5, shuffle=False, pick=None,
        call=None, monitor_options=None):
    """Adam on teacher data under a Monitor; ``pick(output)`` is what the loss reads, ``call``
    how the model is called. Returns ``(report, losses)``."""
    x, y = teacher_data(0, n=2048)
    if shuffle:
        y = np.random.default_rng(1).permutation(y)
    optimizer = optimizer or fw.optim.Adam(model.parameters(), lr=lr)
    pick = pick or (lambda output: output)
    call = call or (lambda model, xb: model(xb))
    losses = []
    with Monitor(model, optimizer, every=every, **(monitor_options or {})) as monitor:
        for xb, yb in batches(x, y, steps=steps):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(pick(call(model, fw.inputs(xb))), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            losses.append(float(loss.item()))
    return monitor.report(), losses


def layer_means(report):
    return {layer.name: layer.mean for layer in report.layers}


# ----------------------------------------------------------------- torch.compile
COMPILE_BACKEND = "aot_eager"   # dynamo's capture and AOT autograd as inductor has them, without
                                # inductor's C++ build (seconds on these cores); see the README


def compiled_mlp(*, dead=False):
    import torch
    from torch import nn

    torch.manual_seed(0)
    plain = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 4))
    if dead:
        with torch.no_grad():
            plain[0].bias.fill_(-20.0)    # every unit of the ReLU below is 0 for every input
    return plain, torch.compile(plain, backend=COMPILE_BACKEND)


@pytest.fixture
def dynamo():
    torch = pytest.importorskip("torch")
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    yield counters
    torch._dynamo.reset()


def test_a_compiled_model_shows_its_layers_without_a_recompile(dynamo):
    plain, model = compiled_mlp()
    report, losses = run(TORCH, model)
    assert alarms(report) == []
    means = layer_means(report)
    assert set(means) == {"_orig_mod.0", "_orig_mod.1", "_orig_mod.2"}
    assert all(np.isfinite(mean) for mean in means.values())
    assert report.loss["classes"] == 4
    assert dynamo["stats"]["unique_graphs"] == 1      # the Monitor forced no recompile
    assert not dynamo["recompiles"]
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in plain.modules())
    assert not model._forward_hooks and not model._forward_pre_hooks


def test_a_compiled_model_trains_exactly_as_without_the_monitor(dynamo):
    import torch

    _, model = compiled_mlp()
    _, watched = run(TORCH, model)
    watched_state = {k: v.clone() for k, v in model.state_dict().items()}
    _, model = compiled_mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    x, y = teacher_data(0, n=2048)
    plain = []
    for xb, yb in batches(x, y, steps=40):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(torch.tensor(xb)), torch.tensor(yb))
        loss.backward()
        optimizer.step()
        plain.append(float(loss.item()))
    assert watched == plain
    assert all(torch.equal(watched_state[k], v) for k, v in model.state_dict().items())


def test_the_replay_leaves_inputs_buffers_and_random_draws_to_the_real_call(dynamo):
    import torch
    from torch import nn

    class Busy(nn.Module):
        """Changes its input in place, draws dropout masks, counts BatchNorm batches."""

        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(FEATURES, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                     nn.Dropout(0.5), nn.Linear(32, 4))

        def forward(self, x):
            x.mul_(2.0)
            return self.net(x)

    def train(monitor):
        torch.manual_seed(0)
        plain = Busy()
        model = torch.compile(plain, backend=COMPILE_BACKEND)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.ones(8, FEATURES)
        y = torch.zeros(8, dtype=torch.long)
        watched = Monitor(model, optimizer, every=1) if monitor else None
        losses = []
        for _ in range(3):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if watched:
                watched.step(loss)
        if watched:
            watched.close()
        return losses, x, plain.net[1].num_batches_tracked.item(), plain.state_dict()

    losses, x, batches_seen, state = train(monitor=True)
    plain_losses, plain_x, plain_batches, plain_state = train(monitor=False)
    assert losses == plain_losses and torch.equal(x, plain_x) and float(x[0, 0]) == 8.0
    assert batches_seen == plain_batches == 3
    assert all(torch.equal(state[k], v) for k, v in plain_state.items())


def test_a_dead_relu_inside_a_compiled_model_is_caught(dynamo):
    _, model = compiled_mlp(dead=True)
    report, _ = run(TORCH, model)
    dead = next(f for f in report.findings if f.code == "DEAD_UNITS")
    assert dead.location == "_orig_mod.1" and dead.severity == "error"
    assert dead.evidence["dead_units"] == 32
    assert dynamo["stats"]["unique_graphs"] == 1


def test_a_compiled_model_whose_eager_replay_fails_says_what_it_cannot_see(dynamo):
    import torch
    from torch import nn

    class GradOnly(nn.Module):
        """Runs only with gradients on: the replay without them raises."""

        def __init__(self):
            super().__init__()
            self.fc, self.act, self.out = nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 4)

        def forward(self, x):
            if not torch.is_grad_enabled():
                raise RuntimeError("this model runs with gradients only")
            return self.out(self.act(self.fc(x)))

    torch.manual_seed(0)
    report, _ = run(TORCH, torch.compile(GradOnly(), backend=COMPILE_BACKEND))
    unseen = next(f for f in report.findings if f.code == "UNSEEN_LAYERS")
    assert unseen.severity == "info" and "runs with gradients only" in unseen.message
    assert unseen.evidence["replays"] == 0 and unseen.evidence["layers"] == 3
    assert alarms(report) == []


# ----------------------------------------------------------------- a module called twice
def shared_relu_net(fw, *, dead_second=False):
    nn = fw.nn

    class SharedReLU(nn.Module):
        """One ReLU module after both hidden layers."""

        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.out = (nn.Linear(FEATURES, 32), nn.Linear(32, 32),
                                            nn.Linear(32, 4))
            self.act = nn.ReLU()

        def forward(self, x):
            return self.out(self.act(self.fc2(self.act(self.fc1(x)))))

    model = SharedReLU()
    if dead_second:
        with fw.no_grad():
            model.fc2.bias.data[...] = -20.0   # the second use of act: 0 for every input
    return model


def test_a_shared_relu_is_recorded_per_call_and_a_healthy_one_is_quiet(fw):
    report, _ = run(fw, shared_relu_net(fw))
    assert alarms(report) == []
    means = layer_means(report)
    assert {"act", "act#2"} <= set(means)
    assert means["act"] != means["act#2"]       # two calls, two records
    assert all(np.isfinite(means[name]) for name in ("act", "act#2"))


def test_a_dead_second_use_of_a_shared_relu_is_caught(fw):
    report, _ = run(fw, shared_relu_net(fw, dead_second=True))
    dead = [f for f in report.findings if f.code == "DEAD_UNITS"]
    assert [f.location for f in dead] == ["act#2"]
    assert dead[0].evidence["dead_units"] == 32 and "act#2" in dead[0].message


def test_calls_beyond_the_limit_fold_into_the_last_record(fw):
    from diagnostics.monitor.probes.activations import MAX_CALLS

    nn = fw.nn

    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell, self.act, self.out = nn.Linear(FEATURES, FEATURES), nn.Tanh(), \
                nn.Linear(FEATURES, 4)

        def forward(self, x):
            for _ in range(MAX_CALLS + 3):
                x = self.act(self.cell(x))
            return self.out(x)

    report, _ = run(fw, Loop(), steps=3, every=1)
    names = [layer.name for layer in report.layers]
    assert names.count("cell") == 1 and f"cell#{MAX_CALLS}" in names
    assert f"cell#{MAX_CALLS + 1}" not in names
    assert len([n for n in names if n.startswith("cell")]) == MAX_CALLS


# ----------------------------------------------------------------- dict and tuple outputs
def two_output_net(fw, kind):
    """Features of width 64 and logits of width 4, as a tuple or a dict."""
    nn = fw.nn

    class TwoOutputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU())
            self.classifier = nn.Linear(64, 4)

        def forward(self, x):
            features = self.body(x)
            logits = self.classifier(features)
            if kind == "tuple":
                return features, logits
            return {"features": features, "logits": logits}

    return TwoOutputs()


READ = {"tuple": lambda output: output[1], "dict": lambda output: output["logits"]}


@pytest.mark.parametrize("kind", ["tuple", "dict"])
def test_the_logits_of_a_tuple_or_dict_output_set_the_chance_level(fw, kind):
    report, _ = run(fw, two_output_net(fw, kind), pick=READ[kind])
    assert report.loss["classes"] == 4
    assert report.loss["chance"] == pytest.approx(np.log(4))
    assert alarms(report) == []


@pytest.mark.parametrize("kind", ["tuple", "dict"])
def test_a_tuple_or_dict_output_at_chance_is_caught(fw, kind):
    report, _ = run(fw, two_output_net(fw, kind), pick=READ[kind], steps=150, lr=1e-3,
                    shuffle=True, every=2)
    at_chance = next(f for f in report.findings if f.code == "LOSS_AT_CHANCE")
    assert at_chance.evidence["classes"] == 4
    assert at_chance.evidence["prediction_entropy"] <= np.log(4) + 1e-6


def test_output_selector_overrides_the_rule(fw):
    # the loss reads the features' first 4 columns: by the rule the logits entry would be
    # "logits"; output= says which entry the user means
    report, _ = run(fw, two_output_net(fw, "dict"), pick=lambda out: out["features"][:, :4],
                    steps=4, every=1, monitor_options={"output": "features"})
    assert report.loss["classes"] == 64
    report, _ = run(fw, two_output_net(fw, "tuple"), pick=READ["tuple"], steps=4, every=1,
                    monitor_options={"output": lambda out: out[1]})
    assert report.loss["classes"] == 4


def test_a_bad_output_selector_is_named(fw):
    model = two_output_net(fw, "dict")
    with pytest.raises(DiagnosticsError, match="output"):
        Monitor(model, output=1.5)
    with pytest.raises(DiagnosticsError, match="output.*'scores'"):
        run(fw, model, pick=READ["dict"], steps=1, monitor_options={"output": "scores"})


# ----------------------------------------------------------------- keyword inputs
def test_keyword_inputs_are_read_under_their_conventional_name(fw):
    ids = fw.labels(np.arange(12).reshape(3, 4))
    mask = fw.inputs(np.ones((3, 4)))
    embeds = fw.inputs(np.ones((3, 4, 2)))
    backend = get_backend(fw.nn.Linear(2, 2))
    assert input_tensor(backend, (), {"attention_mask": mask, "input_ids": ids}) is ids
    assert input_tensor(backend, (), {"labels": ids, "embeddings": embeds}) is embeds
    assert input_tensor(backend, (embeds,), {"input_ids": ids}) is embeds
    assert input_tensor(backend, (), {"flag": True}) is None


def test_a_model_called_with_keywords_is_watched(fw):
    nn = fw.nn

    class Keywords(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.act, self.out = nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 4)

        def forward(self, attention_mask, inputs_embeds):
            return self.out(self.act(self.fc(inputs_embeds * attention_mask)))

    def call(model, xb):
        return model(attention_mask=fw.inputs(np.ones(xb.shape)), inputs_embeds=xb)

    report, _ = run(fw, Keywords(), call=call)
    assert alarms(report) == []
    assert report.loss["classes"] == 4
    assert 0.5 < report.input["std"] < 1.5         # the features, not the mask of ones


# ----------------------------------------------------------------- frozen backbone
def frozen_backbone_net(fw):
    nn = fw.nn

    class FrozenBackbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU())
            self.head = nn.Linear(64, 4)

        def forward(self, x):
            with fw.no_grad():
                features = self.backbone(x)
            return self.head(features)

    return FrozenBackbone()


def test_a_backbone_under_no_grad_outside_the_optimizer_is_frozen_by_design(fw):
    model = frozen_backbone_net(fw)
    report, _ = run(fw, model, optimizer=fw.optim.Adam(model.head.parameters(), lr=1e-2))
    assert alarms(report) == []
    frozen = next(f for f in report.findings if f.code == "NO_GRADIENT")
    assert frozen.severity == "info" and frozen.evidence["frozen"] == 2
    assert "frozen" in frozen.message
    means = layer_means(report)
    assert np.isfinite(means["backbone.0"]) and np.isfinite(means["backbone.1"])


def test_a_backbone_under_no_grad_that_the_optimizer_holds_is_a_cut_graph(fw):
    model = frozen_backbone_net(fw)
    report, _ = run(fw, model)        # the optimizer holds every parameter: meant to learn
    cut = next(f for f in report.findings if f.code == "NO_GRADIENT")
    assert cut.severity == "warning" and cut.location == "backbone.0"
    assert cut.evidence["parameters"] == ["backbone.0.weight", "backbone.0.bias"]
    assert "the optimizer holds them" in cut.message


def test_params_not_updating_says_they_did_not_change(fw):
    nn = fw.nn
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 4))
    report, _ = run(fw, model, optimizer=fw.optim.SGD(model[2].parameters(), lr=0.1),
                    steps=12, every=1)
    finding = next(f for f in report.findings if f.code == "PARAMS_NOT_IN_OPTIMIZER")
    assert finding.message.startswith("0.weight and 0.bias get a gradient at every sampled "
                                      "step but are in no optimizer")
    assert "they never move from the initial values" in finding.message
    assert "PARAMS_NOT_UPDATING" not in {f.code for f in report.findings}


# ----------------------------------------------------------------- packed sequences
def test_an_lstm_over_packed_sequences_has_statistics():
    import torch
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence

    class Packed(nn.Module):
        """``nn.LSTM`` returns ``(PackedSequence, (h, c))``: no tensor at the top level."""

        def __init__(self):
            super().__init__()
            self.rnn, self.out = nn.LSTM(FEATURES, 8, batch_first=True), nn.Linear(8, 4)

        def forward(self, x):
            lengths = torch.full((x.shape[0],), 3, dtype=torch.long)
            _, (h, _) = self.rnn(pack_padded_sequence(x.reshape(-1, 4, 4).repeat(1, 1, 4),
                                                      lengths, batch_first=True))
            return self.out(h[-1])

    torch.manual_seed(0)
    report, _ = run(TORCH, Packed(), steps=3, every=1)
    rnn = next(layer for layer in report.layers if layer.name == "rnn")
    assert np.isfinite(rnn.mean) and rnn.units == 8
