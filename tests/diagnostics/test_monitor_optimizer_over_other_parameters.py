"""An optimizer built before the head was replaced holds none of the model's trainable
parameters: its zero_grad() never clears the new head's .grad, which piles up. That is the
optimizer's story (PARAMS_NOT_UPDATING: it does not hold them), not a missing zero_grad
(STALE_GRADIENTS); a loop that does forget zero_grad on the same frozen model still hears it."""
import torch
from torch import nn

from diagnostics import Monitor


class Net(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.backbone(x))


def _fine_tune(*, optimizer_first, zero_grad=True, steps=120):
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    model = Net(5)
    for p in model.backbone.parameters():
        p.requires_grad = False
    if optimizer_first:
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        model.head = nn.Linear(32, 3)
    else:
        model.head = nn.Linear(32, 3)
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    with Monitor(model, opt, every=10) as monitor:
        for step in range(steps):
            rows = slice(32 * (step % 8), 32 * (step % 8 + 1))
            if zero_grad:
                opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[rows]), y[rows])
            loss.backward()
            opt.step()
            monitor.step(loss)
        return monitor.report()


def _alarms(report):
    return [f for f in report.findings if f.is_alarm]


def test_the_optimizer_holding_other_parameters_leads_not_a_missing_zero_grad():
    report = _fine_tune(optimizer_first=True)
    codes = [f.code for f in report.findings]
    assert "STALE_GRADIENTS" not in codes
    first = _alarms(report)[0]
    assert first.code == "PARAMS_NOT_UPDATING"
    assert "the optimizer does not hold them" in first.message


def test_a_missing_zero_grad_on_a_frozen_backbone_is_still_stale_gradients():
    report = _fine_tune(optimizer_first=False, zero_grad=False)
    assert _alarms(report)[0].code == "STALE_GRADIENTS"


def test_the_optimizer_built_after_the_head_is_quiet():
    assert _alarms(_fine_tune(optimizer_first=False)) == []


def test_a_head_replaced_after_a_whole_model_optimizer_is_params_not_in_optimizer():
    """The optimizer still holds the backbone: the new head is PARAMS_NOT_IN_OPTIMIZER (whose
    message says zero_grad does not clear it), and no STALE_GRADIENTS blames zero_grad."""
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    model = Net(5)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.head = nn.Linear(32, 3)
    with Monitor(model, opt, every=10) as monitor:
        for step in range(120):
            rows = slice(32 * (step % 8), 32 * (step % 8 + 1))
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[rows]), y[rows])
            loss.backward()
            opt.step()
            monitor.step(loss)
        report = monitor.report()
    codes = [f.code for f in report.findings]
    assert "STALE_GRADIENTS" not in codes
    assert _alarms(report)[0].code == "PARAMS_NOT_IN_OPTIMIZER"
    assert "zero_grad() does not clear" in _alarms(report)[0].message
