"""TRAINING_IN_EVAL_MODE: model.eval() for validation and model.train() never called again is
named with the step of the switch; deliberate eval-mode setups stay quiet."""
import pytest
import torch

from diagnostics import Monitor
from tests.diagnostics.monitor_nets import CLASSES, FEATURES, batches, frameworks, teacher_data
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)
from tests.support.hooks import hook_state

pytestmark = pytest.mark.usefixtures("one_torch_thread")
FRAMEWORKS = frameworks()
TORCH = FRAMEWORKS[0]
STEPS, EPOCH = 24, 6


def _net(fw, *, dropout=True, batchnorm=False):
    fw.seed(0)
    nn = fw.nn
    layers = [nn.Linear(FEATURES, 32)]
    if batchnorm:
        layers.append(nn.BatchNorm1d(32))
    layers.append(nn.ReLU())
    if dropout:
        layers.append(nn.Dropout(0.3))
    return nn.Sequential(*layers, nn.Linear(32, CLASSES))


def _train(fw, model, *, restore=True, start=None, every=1, freeze=None, steps=STEPS):
    """A loop validating every EPOCH steps under no_grad after model.eval(); ``restore``
    calls model.train() after validation; ``start`` is the mode set before the loop;
    ``freeze(model)`` runs before every step (deliberate freezing)."""
    x, y = teacher_data(0)
    optimizer = fw.optim.Adam(model.parameters(), lr=1e-3)
    getattr(model, start or "train")()
    with Monitor(model, optimizer, every=every) as monitor:
        for step, (xb, yb) in enumerate(batches(x, y, steps=steps, batch=32)):
            if freeze is not None:
                freeze(model)
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            if (step + 1) % EPOCH == 0:
                model.eval()
                with fw.no_grad():
                    model(fw.inputs(x[:16]))
                if restore and start is None:
                    model.train()
        return [f for f in monitor.report().findings if f.code == "TRAINING_IN_EVAL_MODE"]


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
@pytest.mark.parametrize("layers", [dict(dropout=True), dict(dropout=False, batchnorm=True),
                                    dict(dropout=True, batchnorm=True)],
                         ids=["dropout", "batchnorm", "both"])
def test_validation_without_model_train_is_named_with_its_step(fw, layers):
    found = _train(fw, _net(fw, **layers), restore=False)
    assert [f.severity for f in found] == ["warning"]
    finding = found[0]
    assert finding.evidence["switch_step"] == EPOCH and finding.evidence["first_step"] == EPOCH
    assert finding.evidence["steps"] == STEPS - EPOCH and finding.evidence["ongoing"]
    assert "model.eval() was called" in finding.message and f"at step {EPOCH}" in finding.message
    assert f"the last {STEPS - EPOCH} training steps" in finding.message
    for word, present in (("dropout", layers["dropout"]),
                          ("batch norm", layers.get("batchnorm", False))):
        assert (word in finding.message) == present
    assert "model.train() after validation" in finding.suggestion


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
def test_the_fixed_loop_is_quiet(fw):
    assert _train(fw, _net(fw, batchnorm=True), restore=True) == []


@pytest.mark.parametrize("every", [1, 5, 50])
def test_found_whatever_the_sampling(every):
    fw = TORCH
    found = _train(fw, _net(fw), restore=False, every=every)
    assert found and found[0].evidence["steps"] == STEPS - EPOCH


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
def test_deliberate_eval_mode_setups_stay_quiet(fw):
    # trained in eval mode from the start: no switch from train mode
    assert _train(fw, _net(fw, batchnorm=True), start="eval") == []
    # no dropout or batch norm: the mode changes nothing
    assert _train(fw, _net(fw, dropout=False), restore=False) == []

    def freeze_batchnorm(model):   # every BN module in eval, the model itself in train mode
        model.train()
        for _, module in model.named_modules():
            if type(module).__name__.startswith("BatchNorm"):
                module.eval()
    assert _train(fw, _net(fw, dropout=False, batchnorm=True), freeze=freeze_batchnorm) == []


def test_a_frozen_backbone_with_a_training_head_stays_quiet():
    nn = torch.nn
    torch.manual_seed(0)

    class FineTune(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(FEATURES, 32), nn.BatchNorm1d(32), nn.ReLU())
            self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, CLASSES))

        def forward(self, x):
            return self.head(self.backbone(x))

    fw = TORCH
    model = FineTune()
    assert _train(fw, model, freeze=lambda m: (m.train(), m.backbone.eval())) == []


def test_a_short_lapse_is_not_reported_and_a_long_one_is_with_its_end():
    fw = TORCH
    x, y = teacher_data(1)
    for lapse, expected in ((3, 0), (8, 1)):
        model = _net(fw)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        with Monitor(model, optimizer, every=1) as monitor:
            for step, (xb, yb) in enumerate(batches(x, y, steps=20, batch=32)):
                if step == 4:
                    model.eval()
                    with torch.no_grad():
                        model(fw.inputs(x[:16]))
                if step == 4 + lapse:
                    model.train()     # the next epoch starts in train mode again
                optimizer.zero_grad()
                loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
                loss.backward()
                optimizer.step()
                monitor.step(loss)
            found = [f for f in monitor.report().findings if f.code == "TRAINING_IN_EVAL_MODE"]
        assert len(found) == expected
    assert found[0].evidence["steps"] == 8 and not found[0].evidence["ongoing"]
    assert "until the model was put back in train mode" in found[0].message


def test_an_adversarial_step_in_eval_mode_inside_a_training_step_stays_quiet():
    """Attacks are made in eval mode with gradients, then the model trains in train mode."""
    fw = TORCH
    model = _net(fw, batchnorm=True)
    x, y = teacher_data(2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with Monitor(model, optimizer, every=1) as monitor:
        for step, (xb, yb) in enumerate(batches(x, y, steps=16, batch=32)):
            xb, yb = fw.inputs(xb).requires_grad_(True), fw.labels(yb)
            model.eval()
            with torch.no_grad():
                model(xb)
            attack = torch.autograd.grad(fw.F.cross_entropy(model(xb), yb), xb)[0]
            model.train()
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(xb + 0.01 * attack.sign()), yb)
            loss.backward()
            optimizer.step()
            monitor.step(loss)
        assert not [f for f in monitor.report().findings if f.code == "TRAINING_IN_EVAL_MODE"]


def test_no_hook_left_behind():
    fw = TORCH
    model = _net(fw, batchnorm=True)
    before = hook_state(model)
    _train(fw, model, restore=False)
    assert hook_state(model) == before
