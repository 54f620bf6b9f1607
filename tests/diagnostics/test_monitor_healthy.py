"""No warning and no error on healthy runs: several seeds and architectures, torch and minigrad."""
import pytest

from tests.diagnostics.monitor_nets import (FEATURES, cnn, frameworks, functional_relu_mlp, mlp,
                                            residual_net, teacher_data, train)
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ARCHITECTURES = {
    "relu mlp": (lambda fw: mlp(fw, [FEATURES, 32, 32, 4]), {"lr": 0.1}),
    "tanh mlp": (lambda fw: mlp(fw, [FEATURES, 32, 32, 4], "Tanh"), {"lr": 0.1}),
    "residual net with layer norm": (residual_net, {"lr": 0.1}),
    "mlp with functional relu": (functional_relu_mlp, {"lr": 0.1}),
    "cnn": (cnn, {"lr": 0.5, "images": True}),
}


@pytest.mark.parametrize("fw", frameworks(), ids=lambda fw: fw.name)
@pytest.mark.parametrize("architecture", list(ARCHITECTURES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_healthy_training_is_quiet(fw, architecture, seed):
    build, options = ARCHITECTURES[architecture]
    fw.seed(seed)
    report = train(fw, build(fw), steps=80, seed=seed, data=teacher_data(seed), **options)
    assert report.passed, str(report)
    assert report.history.losses[-10:].mean() < report.history.losses[:10].mean()


@pytest.mark.parametrize("fw", frameworks(), ids=lambda fw: fw.name)
def test_healthy_relu_layer_with_half_its_outputs_at_zero_is_not_dead(fw):
    fw.seed(0)
    report = train(fw, mlp(fw, [FEATURES, 64, 4]), steps=30)
    relu = next(layer for layer in report.layers if layer.type_name == "ReLU")
    assert 0.3 < relu.zero_fraction < 0.7       # about half the outputs are 0 ...
    assert relu.dead_fraction < 0.05            # ... but the units fire on some inputs
    assert "DEAD_UNITS" not in report.codes()


@pytest.mark.parametrize("fw", frameworks(), ids=lambda fw: fw.name)
def test_healthy_training_with_adam_and_default_sampling_is_quiet(fw):
    fw.seed(0)
    model = residual_net(fw)
    optimizer = fw.optim.Adam(model.parameters(), lr=1e-2)
    report = train(fw, model, steps=300, optimizer=optimizer,
                   monitor_options={"every": 10, "window": 20})
    assert report.passed, str(report)
    assert report.sampled_steps == 31       # steps 0 and 1, then every 10th


@pytest.mark.parametrize("fw", frameworks(), ids=lambda fw: fw.name)
def test_gradient_accumulation_over_micro_batches_is_not_stale(fw):
    # four backward passes add up on purpose before each optimizer step; the Monitor measures
    # the first gradient of each iteration, against a .grad that zero_grad emptied
    from diagnostics import Monitor
    from tests.diagnostics.monitor_nets import batches

    fw.seed(0)
    model = mlp(fw, [FEATURES, 32, 32, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    x, y = teacher_data(0)
    with Monitor(model, optimizer, every=1) as monitor:
        for step, (xb, yb) in enumerate(batches(x, y, steps=240, batch=16)):
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb)) / 4
            loss.backward()
            if step % 4 == 3:
                optimizer.step()
                optimizer.zero_grad()
                monitor.step(loss)
    report = monitor.report()
    assert report.passed, str(report)
    assert report.history.steps == 60
