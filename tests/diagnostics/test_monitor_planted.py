"""Each finding code fires, with its location, on a planted bug, on torch and on minigrad."""
import numpy as np
import pytest

from diagnostics import Monitor
from tests.diagnostics.monitor_nets import (FEATURES, batches, detached_net, frameworks,
                                            functional_relu_mlp, mlp, teacher_data, train)
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
FRAMEWORKS = frameworks()


def located(report, code):
    """{location: severity} of the findings with ``code``."""
    return {f.location: f.severity for f in report.findings if f.code == code}


@pytest.fixture(params=FRAMEWORKS, ids=lambda fw: fw.name)
def fw(request):
    request.param.seed(0)
    return request.param


def test_missing_zero_grad_is_stale_within_two_steps(fw):
    alerts = []
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 32, 32, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(model, optimizer, on_finding=alerts.append) as monitor:   # default sampling
        for step, (xb, yb) in enumerate(batches(x, y, steps=2)):
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))   # no zero_grad
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    assert [a.code for a in alerts] == ["STALE_GRADIENTS"]
    finding = alerts[0]
    assert finding.severity == "error" and finding.location == "0.weight"
    assert finding.evidence["step"] == 1
    assert len(finding.evidence["parameters"]) == 6
    assert finding.evidence["previous_norm"] > 0 and finding.evidence["incoming_norm"] > 0


@pytest.mark.parametrize("set_to_none", [True, False])
def test_a_gan_discriminator_zeroed_after_the_generator_backward_is_not_stale(fw, set_to_none):
    """DCGAN's loop with a Monitor per network: the generator's backward runs through the
    discriminator and adds to its held .grad, but optD.zero_grad() empties it before D's own
    backward and step, so nothing stale reaches optD; without any zero_grad it is stale."""
    x, _ = teacher_data(0)
    generator = mlp(fw, [4, 16, FEATURES])
    discriminator = mlp(fw, [FEATURES, 16, 1])
    opt_g = fw.optim.SGD(generator.parameters(), lr=0.01)
    opt_d = fw.optim.SGD(discriminator.parameters(), lr=0.01)
    rng = np.random.default_rng(0)
    with Monitor(discriminator, opt_d, every=1) as monitor:
        for step in range(6):
            noise = fw.inputs(rng.standard_normal((32, 4)).astype(np.float32))
            real = fw.inputs(x[32 * step:32 * step + 32])
            opt_d.zero_grad(set_to_none=set_to_none)
            fake = generator(noise)
            d_loss = (discriminator(real).mean() - discriminator(fake.detach()).mean()) ** 2
            d_loss.backward()
            opt_d.step()
            monitor.step(d_loss)
            opt_g.zero_grad()
            g_loss = -discriminator(generator(noise)).mean()   # backward through D's weights
            g_loss.backward()
            opt_g.step()
    codes = monitor.report().codes()
    assert "STALE_GRADIENTS" not in codes
    # D's last bias gets no gradient from d_loss (the two means cancel it) but one from the
    # generator's pass: the record is D's own, after its zero_grad, so the step is not blamed
    if set_to_none:
        assert "PARAMS_NOT_UPDATING" not in codes


@pytest.mark.parametrize("bug", ["generator output detached", "no backward", None])
def test_a_model_the_loss_does_not_reach_gets_no_gradient_named(fw, bug):
    """A GAN generator whose output is detached in its own step (backward runs, through the
    discriminator only), or a loop without loss.backward(): no parameter of the monitored
    model ever gets a gradient. The healthy twin stays quiet."""
    generator = mlp(fw, [4, 16, FEATURES])
    discriminator = mlp(fw, [FEATURES, 16, 1])
    opt_g = fw.optim.SGD(generator.parameters(), lr=0.01)
    rng = np.random.default_rng(0)
    with Monitor(generator, opt_g, every=1) as monitor:
        for step in range(6):
            noise = fw.inputs(rng.standard_normal((32, 4)).astype(np.float32))
            opt_g.zero_grad()
            fake = generator(noise)
            if bug == "generator output detached":
                fake = fake.detach()
            g_loss = -discriminator(fake).mean()
            if bug != "no backward":
                g_loss.backward()
            opt_g.step()
            monitor.step(g_loss)
        report = monitor.report()
    found = [f for f in report.findings if f.code == "NO_GRADIENT"]
    if bug is None:
        assert found == []
        return
    (finding,) = found
    assert finding.severity == "error" and finding.location == "0"
    assert finding.evidence["backward_ran"] == (bug == "generator output detached")
    assert ("cut from the loss" in finding.message) == (bug == "generator output detached")
    assert ("loss.backward() is not called" in finding.message) == (bug == "no backward")


def test_two_backward_passes_without_any_zero_grad_stay_stale(fw):
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.01)
    with Monitor(model, optimizer, every=1) as monitor:
        for xb, yb in batches(x, y, steps=4):
            for half in (slice(0, 32), slice(32, 64)):   # two losses, two backward passes
                fw.F.cross_entropy(model(fw.inputs(xb[half])), fw.labels(yb[half])).backward()
            optimizer.step()
            monitor.step(fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb)))
    assert located(monitor.report(), "STALE_GRADIENTS") == {"0.weight": "error"}


def test_zero_grad_that_fills_zeros_is_not_stale(fw):
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 32, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(model, optimizer, every=1) as monitor:
        for xb, yb in batches(x, y, steps=4):
            optimizer.zero_grad(set_to_none=False)
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    assert "STALE_GRADIENTS" not in monitor.report().codes()


def test_learning_rate_ten_diverges(fw):
    report = train(fw, mlp(fw, [FEATURES, 32, 32, 4]), steps=80, lr=10)
    assert located(report, "LOSS_DIVERGING") == {"loss": "error"}
    assert "lower the learning rate 10x (lr=10 -> 1)" in next(
        f.suggestion for f in report.findings if f.code == "LOSS_DIVERGING")


def test_the_advice_to_lower_a_decayed_learning_rate_quotes_its_peak(fw):
    """lr=10 decaying linearly to 0 (a Trainer's default schedule): near the end "lr=0 -> 0"
    is no advice; the peak the run was set to is (9.875: the rate at the first step seen)."""
    model = mlp(fw, [FEATURES, 32, 32, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=10)
    x, y = teacher_data(0)
    steps = 80
    with Monitor(model, optimizer, every=1, window=10) as monitor:
        for step, (xb, yb) in enumerate(batches(x, y, steps=steps)):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            for group in optimizer.param_groups:
                group["lr"] = 10 * (1 - (step + 1) / steps)
            monitor.step(loss)
        report = monitor.report()
    advice = [f.suggestion for f in report.findings if "lower the learning rate" in f.suggestion]
    assert advice and all("lower the learning rate 10x (its peak lr=9.875 -> 0.9875; the "
                          "schedule has it at" in a for a in advice)


@pytest.mark.parametrize("plant", ["negative bias", "constant negative weights"])
def test_constant_negative_init_kills_relu_units(fw, plant):
    model = mlp(fw, [FEATURES, 32, 32, 4])
    x, y = teacher_data(0)
    if plant == "negative bias":
        fw.nn.init.constant_(model[0].bias, -10.0)
    else:   # positive inputs, every weight and bias negative
        fw.nn.init.constant_(model[0].weight, -0.5)
        fw.nn.init.constant_(model[0].bias, -0.5)
        x = np.abs(x)
    report = train(fw, model, steps=20, data=(x, y))
    dead = next(f for f in report.findings if f.code == "DEAD_UNITS" and f.location == "1")
    assert dead.severity == "error"
    assert dead.evidence["dead_units"] == dead.evidence["units"] == 32
    assert dead.suggestion.startswith("LeakyReLU")   # dead from the start: the init first
    assert dead.evidence["died_in_training"] == 0
    assert "0" not in located(report, "DEAD_UNITS")   # the ReLU module, not also the Linear


@pytest.mark.parametrize("dead_units, severity", [(32, "error"), (20, "warning")])
def test_dead_units_behind_a_functional_relu_are_seen_through_the_gradient(fw, dead_units,
                                                                           severity):
    model = functional_relu_mlp(fw)
    bias = np.zeros(32)
    bias[:dead_units] = -10.0          # these units of fc1 are 0 for every input
    _write(fw, model.fc1.weight, 0.05 * np.random.default_rng(0).standard_normal((32, FEATURES)))
    _write(fw, model.fc1.bias, bias)
    report = train(fw, model, steps=20)
    assert located(report, "DEAD_UNITS")["fc1"] == severity
    dead = next(f for f in report.findings if f.code == "DEAD_UNITS" and f.location == "fc1")
    assert dead.evidence["dead_units"] == dead_units and dead.evidence["units"] == 32
    assert dead.evidence["dead_indices"] == list(range(dead_units))[:20]
    assert dead.evidence["seen_through"] == "gradient"
    assert dead.evidence["parameter"] == "fc1.weight"
    assert "fc1 (Linear)" in dead.message and "applied as a function" in dead.message
    assert dead.evidence["died_in_training"] == 0 and dead.evidence["activation_after"] is None


@pytest.mark.parametrize("kill", [True, False], ids=["killed at step 10", "healthy twin"])
def test_gelu_units_killed_during_training_name_the_gelu_and_the_step_size_first(fw, kill):
    """A step that pushes every pre-activation of layer 2 far below 0 (as a huge learning rate
    does): the GELU after it is flat there and passes back 0, so the units are dead although
    no ReLU exists; they fired before, so the first fix is the learning rate, not the init."""
    model = mlp(fw, [FEATURES, 32, 32, 4], "GELU")
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    x, y = teacher_data(0)
    with Monitor(model, optimizer, every=1, window=10) as monitor:
        for step, (xb, yb) in enumerate(batches(x, y, steps=30)):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            if kill and step == 10:
                _write(fw, model[2].bias, np.full(32, -60.0))
        report = monitor.report()
    if not kill:
        assert "DEAD_UNITS" not in report.codes()
        return
    dead = next(f for f in report.findings if f.code == "DEAD_UNITS" and f.location == "2")
    assert dead.severity == "error" and dead.evidence["dead_units"] == 32
    assert dead.evidence["activation_after"] == "3" and dead.evidence["largest_output"] < -30
    assert "layer 3 (GELU) after them passes back 0" in dead.message
    assert dead.evidence["died_in_training"] == 32 and "died during training" in dead.message
    assert dead.suggestion.startswith("lower the learning rate 10x")
    assert "LeakyReLU" not in dead.suggestion and "before the GELU" in dead.suggestion
    first = next(f for f in report.findings if f.code == "DEAD_UNITS" and f.location == "0")
    assert "no gradient reaches the layer at all" in first.message


def test_a_gradient_of_zeros_everywhere_is_no_evidence_of_dead_units(fw):
    # the loss is already 0 (MSE on its own output): every gradient is 0, no unit is "dead"
    model = functional_relu_mlp(fw)
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    x, _ = teacher_data(0)
    with Monitor(model, optimizer, every=1) as monitor:
        for xb, _ in batches(x, x, steps=8):
            optimizer.zero_grad()
            out = model(fw.inputs(xb))
            loss = fw.F.mse_loss(out, out.detach())
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    assert "DEAD_UNITS" not in monitor.report().codes()


def test_twenty_sigmoid_layers_starve_the_first_layers(fw):
    report = train(fw, mlp(fw, [FEATURES] + [32] * 19 + [4], "Sigmoid"), steps=12)
    finding = next(f for f in report.findings if f.code == "VANISHING_GRADIENTS")
    assert finding.location == "0"     # the earliest layer in the model's own order
    flow = list(finding.evidence["gradient_rms"].values())
    assert flow[0] < 1e-4 * max(flow)
    assert "residual" in finding.suggestion
    assert "PARAMS_NOT_UPDATING" not in report.codes()


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid:RuntimeWarning")
def test_twenty_layers_with_too_large_init_explode(fw):
    model = mlp(fw, [FEATURES] + [32] * 19 + [4])
    for layer in model:
        if hasattr(layer, "weight"):
            fw.nn.init.normal_(layer.weight, 0.0, 1.0)
    report = train(fw, model, steps=12, lr=0.01)
    assert "EXPLODING_GRADIENTS" in report.codes()
    assert located(report, "EXPLODING_ACTIVATIONS")
    exploding = [f for f in report.findings if f.code == "EXPLODING_GRADIENTS"]
    assert any("clip_grad_norm_" in f.suggestion for f in exploding)


def test_exploding_gradients_suggest_a_clip_value_from_the_history(fw):
    model = mlp(fw, [FEATURES, 32, 4])
    x, y = teacher_data(0)
    optimizer = fw.optim.SGD(model.parameters(), lr=0.05)
    with Monitor(model, optimizer, every=1) as monitor:
        for step, (xb, yb) in enumerate(batches(x, y, steps=12)):
            optimizer.zero_grad()
            scale = 1e6 if step == 11 else 1.0   # a loss spike: gradients 10^6 times larger
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb)) * scale
            loss.backward()
            monitor.step(loss)
    finding = next(f for f in monitor.report().findings if f.code == "EXPLODING_GRADIENTS")
    norms = monitor.history.column("gradient_norm")[:11]
    assert finding.evidence["suggested_clip"] == pytest.approx(np.percentile(norms, 10))
    assert f"max_norm={finding.evidence['suggested_clip']:.3g}" in finding.suggestion


def test_optimizer_over_another_models_parameters(fw):
    model, other = mlp(fw, [FEATURES, 32, 4]), mlp(fw, [FEATURES, 32, 4])
    report = train(fw, model, steps=12, optimizer=fw.optim.SGD(other.parameters(), lr=0.1))
    finding = next(f for f in report.findings if f.code == "PARAMS_NOT_UPDATING")
    assert finding.location is None and finding.severity == "error"
    assert sorted(finding.evidence["not_in_optimizer"]) == sorted(
        name for name, _ in model.named_parameters())
    assert "does not hold them" in finding.message


def test_parameters_left_out_of_the_optimizer(fw):
    model = mlp(fw, [FEATURES, 32, 4])
    optimizer = fw.optim.SGD(model[2].parameters(), lr=0.1)   # the first layer forgotten
    report = train(fw, model, steps=12, optimizer=optimizer)
    finding = next(f for f in report.findings if f.code == "PARAMS_NOT_IN_OPTIMIZER")
    assert finding.location == "0"
    assert finding.evidence["parameters"] == ["0.weight", "0.bias"]
    assert "in no optimizer" in finding.message
    # named as what it is, not as its symptoms: not "unchanged" nor "zero_grad is missing"
    codes = {f.code for f in report.findings}
    assert not codes & {"PARAMS_NOT_UPDATING", "STALE_GRADIENTS"}, codes


def _sparse_embedding_run(fw, *, optimizer_of):
    """Vocabulary 100,000 x 16 (1.6M entries, its update measured on 16,384 of them) and 4
    words per batch: the sampled entries almost never get a gradient."""
    nn = fw.nn

    class Bag(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(100_000, 16)
            self.head = nn.Linear(16, 4)

        def forward(self, words):
            return self.head(self.embedding(words).sum(dim=1))
    model = Bag()
    optimizer = optimizer_of(model)
    rng = np.random.default_rng(0)
    with Monitor(model, optimizer) as monitor:      # default sampling
        for _ in range(120):
            words, labels = rng.integers(0, 100_000, (4, 1)), rng.integers(0, 4, 4)
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.labels(words)), fw.labels(labels))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    return monitor.report()


def test_a_sparse_embedding_whose_sampled_entries_get_no_gradient_is_updating(fw):
    """Its sampled entries do not move because no gradient reached them, not because the
    optimizer skipped them: no PARAMS_NOT_UPDATING (before, an error at the first samples)."""
    report = _sparse_embedding_run(fw, optimizer_of=lambda m: fw.optim.SGD(m.parameters(),
                                                                            lr=0.1))
    assert "PARAMS_NOT_UPDATING" not in report.codes()


def test_a_large_dense_layer_left_out_of_the_optimizer_is_still_found(fw):
    """A layer larger than the update sample whose gradient is dense: the sampled entries get
    a gradient and do not move."""
    model = mlp(fw, [FEATURES, 1200, 4])          # 19,200 weights: measured on a sample
    optimizer = fw.optim.SGD(model[2].parameters(), lr=0.1)
    report = train(fw, model, steps=12, optimizer=optimizer)
    finding = next(f for f in report.findings if f.code == "PARAMS_NOT_IN_OPTIMIZER")
    assert finding.evidence["parameters"] == ["0.weight", "0.bias"]


def test_detach_in_the_middle_of_forward(fw):
    report = train(fw, detached_net(fw), steps=12)
    assert located(report, "NO_GRADIENT") == {"fc1": "warning"}
    finding = next(f for f in report.findings if f.code == "NO_GRADIENT")
    assert finding.evidence["parameters"] == ["fc1.weight", "fc1.bias"]


def test_frozen_parameters_in_the_optimizer_are_reported_as_info(fw):
    model = mlp(fw, [FEATURES, 32, 4])
    model[0].weight.requires_grad = False
    report = train(fw, model, steps=4)
    finding = next(f for f in report.findings if f.code == "NO_GRADIENT")
    assert finding.severity == "info" and finding.evidence["parameters"] == ["0.weight"]


def test_shuffled_labels_sit_at_chance_on_a_plateau(fw):
    report = train(fw, mlp(fw, [FEATURES, 32, 32, 4]), steps=150, lr=0.05,
                   shuffle_labels=True, data=teacher_data(0, n=4096))
    at_chance = next(f for f in report.findings if f.code == "LOSS_AT_CHANCE")
    assert at_chance.evidence["chance_loss"] == pytest.approx(np.log(4))
    assert at_chance.evidence["classes"] == 4
    assert "LOSS_PLATEAU" in report.codes()


def test_inputs_scaled_by_a_thousand(fw):
    report = train(fw, mlp(fw, [FEATURES, 32, 32, 4]), steps=12, lr=0.001, scale=1000)
    finding = next(f for f in report.findings if f.code == "UNNORMALIZED_INPUT")
    assert finding.location == "data" and finding.evidence["std"] > 500
    assert located(report, "EXPLODING_ACTIVATIONS") == {"0": "warning"}


def test_evaluation_pass_in_training_mode(fw):
    nn = fw.nn
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Dropout(0.2),
                          nn.Linear(32, 4))
    report = train(fw, model, steps=6, eval_every=5)
    finding = next(f for f in report.findings if f.code == "TRAIN_MODE_AT_EVAL")
    assert finding.location == "2" and finding.evidence["modules"] == ["2"]
    assert "model.eval()" in finding.suggestion


def _evaluate_with(fw, model, switch_on, steps=6):
    """Train, then evaluate after model.eval() with the modules ``switch_on`` names put back
    in train mode (Monte Carlo dropout; or a batch norm a ``train()`` override left on)."""
    x, y = teacher_data(0)
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(model, optimizer, every=1) as monitor:
        for xb, yb in batches(x, y, steps=steps):
            model.train()
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            model.eval()
            for name in switch_on:
                model[int(name)].train()
            with fw.no_grad():
                for _ in range(3):
                    model(fw.inputs(x[:32]))
    return monitor.report()


def test_monte_carlo_dropout_after_model_eval_is_quiet(fw):
    nn = fw.nn
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Dropout(0.2),
                          nn.Linear(32, 4))
    assert "TRAIN_MODE_AT_EVAL" not in _evaluate_with(fw, model, ["2"]).codes()


def test_batch_norm_left_in_train_mode_under_an_eval_model_is_flagged(fw):
    nn = fw.nn
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.BatchNorm1d(32), nn.ReLU(),
                          nn.Dropout(0.2), nn.Linear(32, 4))
    report = _evaluate_with(fw, model, ["1", "3"])
    finding = next(f for f in report.findings if f.code == "TRAIN_MODE_AT_EVAL")
    assert finding.evidence["modules"] == ["1", "3"]


def test_evaluation_after_model_eval_is_quiet(fw):
    nn = fw.nn
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.BatchNorm1d(32), nn.ReLU(),
                          nn.Linear(32, 4))
    x, y = teacher_data(0)
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(model, optimizer, every=1) as monitor:
        for xb, yb in batches(x, y, steps=6):
            model.train()
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            model.eval()
            with fw.no_grad():
                model(fw.inputs(x[:32]))
    assert "TRAIN_MODE_AT_EVAL" not in monitor.report().codes()


def test_tanh_with_large_weights_saturates(fw):
    model = mlp(fw, [FEATURES, 32, 32, 4], "Tanh")
    for layer in model:
        if hasattr(layer, "weight"):
            fw.nn.init.normal_(layer.weight, 0.0, 3.0)
    report = train(fw, model, steps=12, lr=0.01)
    assert set(located(report, "SATURATED_ACTIVATIONS")) == {"1", "3"}


def test_zero_weights_collapse_a_layer(fw):
    model = mlp(fw, [FEATURES, 32, 32, 4])
    fw.nn.init.zeros_(model[2].weight)
    report = train(fw, model, steps=12, lr=0.0)
    assert located(report, "COLLAPSED_ACTIVATIONS") == {"2": "warning"}


def test_nan_in_the_data(fw):
    x, y = teacher_data(0)
    x = x.copy()
    x[:, 3] = np.nan
    report = train(fw, mlp(fw, [FEATURES, 16, 4]), steps=8, data=(x, y))
    assert located(report, "DATA_NONFINITE") == {"data": "error"}
    assert located(report, "NAN_LOSS") == {"loss": "error"}
    nan = next(f for f in report.findings if f.code == "NAN_LOSS")
    assert nan.evidence["step"] == 0 and "log_softmax" in nan.suggestion


def test_kept_loss_tensors_with_retained_graphs(fw):
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    kept = []
    with Monitor(model, optimizer, every=1) as monitor:
        for xb, yb in batches(x, y, steps=5):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward(retain_graph=True)
            optimizer.step()
            monitor.step(loss)
            kept.append(loss)            # the bug: a tensor with its graph, not loss.item()
    finding = next(f for f in monitor.report().findings if f.code == "GRAPH_RETAINED")
    assert finding.severity == "error" and finding.evidence["saved_activations_alive"]
    assert "loss.item()" in finding.suggestion


def test_kept_losses_after_a_plain_backward_are_a_warning(fw):
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    kept = []
    with Monitor(model, optimizer, every=1) as monitor:
        for xb, yb in batches(x, y, steps=5):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            kept.append(loss)
    finding = next(f for f in monitor.report().findings if f.code == "GRAPH_RETAINED")
    assert finding.severity == "warning"
    assert not finding.evidence["saved_activations_alive"]


def test_alerts_come_once_per_finding(fw):
    alerts = []
    report = train(fw, mlp(fw, [FEATURES, 32, 4]), steps=12, zero_grad=False,
                   monitor_options={"on_finding": alerts.append})
    codes = [a.code for a in alerts]
    assert codes.count("STALE_GRADIENTS") == 1
    assert {(a.code, a.location) for a in alerts} == {(f.code, f.location)
                                                       for f in report.findings}


def _nonfinite_gradients_after(fw, calm_steps):
    """EXPLODING_GRADIENTS of a run whose batches turn NaN after ``calm_steps`` healthy ones."""
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(model, optimizer, every=1) as monitor:
        for step, (xb, yb) in enumerate(batches(x, y, steps=calm_steps + 2)):
            xb = xb.copy()
            xb[:, 3] = np.nan if step >= calm_steps else xb[:, 3]
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    return next(f for f in monitor.report().findings if f.code == "EXPLODING_GRADIENTS")


def test_nonfinite_gradients_suggest_a_clip_from_the_calm_history(fw):
    finding = _nonfinite_gradients_after(fw, 5)
    assert finding.severity == "error"
    clip = finding.evidence["suggested_clip"]
    assert clip is not None and np.isfinite(clip) and clip > 0
    assert f"max_norm={clip:.3g}" in finding.suggestion
    assert finding.evidence["calm_gradient_norms"] == 5


def test_nonfinite_gradients_at_the_first_step_say_there_is_no_history(fw):
    finding = _nonfinite_gradients_after(fw, 0)
    assert finding.evidence["suggested_clip"] is None
    assert finding.evidence["calm_gradient_norms"] == 0
    assert "no calm gradient history" in finding.suggestion


def test_nan_activations_are_not_counted_as_zeros(fw):
    x, y = teacher_data(0)
    x = x.copy()
    x[:, 3] = np.nan
    report = train(fw, mlp(fw, [FEATURES, 16, 4]), steps=3, data=(x, y))
    assert {layer.name: layer.zero_fraction for layer in report.layers} == {
        "0": 0.0, "1": 0.0, "2": 0.0}


def test_dead_units_are_judged_over_several_sampled_steps(fw):
    # 100 ReLU units: 50 dead for every input, 50 that each fire on one in 50 inputs (one-hot
    # rows). One batch of 64 misses about a quarter of the rare ones (about 64% look dead);
    # 3 sampled steps (192 values per unit) miss about 2% of them.
    positions = 50
    x = np.eye(positions, dtype=np.float32)[np.random.default_rng(0).integers(0, positions, 4096)]
    y = np.zeros(len(x), dtype=np.int64)
    model = mlp(fw, [positions, 2 * positions, 4])
    weight = np.vstack([np.eye(positions), np.zeros((positions, positions))])
    _write(fw, model[0].weight, weight)
    _write(fw, model[0].bias, np.full(2 * positions, -0.5))
    report = train(fw, model, steps=8, lr=1e-12, data=(x, y))
    dead = next(f for f in report.findings if f.code == "DEAD_UNITS")
    assert dead.severity == "warning"
    assert 0.5 <= dead.evidence["dead_fraction"] <= 0.52
    assert dead.evidence["values_per_unit"] >= 3 * 64


def _write(fw, param, array):
    if fw.name == "torch":
        import torch
        with torch.no_grad():
            param.copy_(torch.tensor(array, dtype=param.dtype))
    else:
        param.data[...] = array.astype(param.data.dtype)


def test_a_model_called_with_keyword_arguments_has_its_input_watched(fw):
    # model(x=batch), as with model(**batch): the input is found among the keyword arguments
    model = functional_relu_mlp(fw)
    fw.nn.init.constant_(model.fc1.bias, -1e5)        # dead even for inputs scaled by 1000
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    x, y = teacher_data(0)
    with Monitor(model, optimizer, every=1) as monitor:
        for xb, yb in batches(x * 1000, y, steps=12):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(x=fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    report = monitor.report()
    assert located(report, "UNNORMALIZED_INPUT") == {"data": "warning"}
    assert located(report, "DEAD_UNITS")["fc1"] == "error"


def test_a_nan_loss_is_alerted_at_its_own_step_between_sampled_ones(fw):
    alerts, steps_seen = [], []
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(model, optimizer, on_finding=alerts.append) as monitor:   # every=50
        for step, (xb, yb) in enumerate(batches(x, y, steps=12)):
            xb = xb * np.nan if step == 7 else xb
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            monitor.step(loss)
            steps_seen.append([a.code for a in alerts])
    assert steps_seen[6] == [] and "NAN_LOSS" in steps_seen[7]
    nan = next(a for a in alerts if a.code == "NAN_LOSS")
    assert nan.evidence["step"] == 7 and nan.location == "loss"
    # the per-step tier traces the NaN gradient of that step to its batch: the root cause
    data = next(a for a in alerts if a.code == "DATA_NONFINITE")
    assert data.evidence["step"] == 7 and "batch 7" in data.message
