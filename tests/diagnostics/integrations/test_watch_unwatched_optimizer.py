"""``TrainingWatch``: an optimizer that steps parameters belonging to no module the script
calls (built before the head was replaced, or over a copy) is named (OPTIMIZER_NOT_WATCHED),
not passed over in silence; an optimizer built after the change is watched and says nothing."""
import copy

import pytest

torch = pytest.importorskip("torch")

from diagnostics.integrations import TrainingWatch  # noqa: E402
from diagnostics.integrations.watch_command import _print_reports  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.backbone = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())
        self.head = torch.nn.Linear(16, classes)

    def forward(self, x):
        return self.head(self.backbone(x))


def _fine_tune(*, optimizer_first):
    torch.manual_seed(0)
    x = torch.randn(64, 8)
    model = Net(5)
    pretrain = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(4):
        pretrain.zero_grad()
        torch.nn.functional.cross_entropy(model(x), torch.randint(0, 5, (64,))).backward()
        pretrain.step()
    for p in model.backbone.parameters():
        p.requires_grad = False
    if optimizer_first:      # the bug: the optimizer holds the old head
        tune = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        model.head = torch.nn.Linear(16, 3)
    else:
        model.head = torch.nn.Linear(16, 3)
        tune = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    y = torch.randint(0, 3, (64,))
    for _ in range(4):
        tune.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        tune.step()


def test_an_optimizer_built_before_the_head_was_replaced_is_named(capsys):
    alerts = []
    with TrainingWatch(on_finding=lambda label, f: alerts.append((label, f.code))) as watch:
        _fine_tune(optimizer_first=True)
    (finding,) = watch.unwatched
    assert finding.code == "OPTIMIZER_NOT_WATCHED" and finding.severity == "warning"
    assert finding.location == "tune (Adam)"
    assert "belong to no module the script calls (model)" in finding.message
    assert "(3, 16), (3,)" not in finding.message and "(5, 16), (5,)" in finding.message
    assert alerts == [("tune (Adam)", "OPTIMIZER_NOT_WATCHED")]
    _print_reports(watch)
    assert "optimizers that stepped and were not watched" in capsys.readouterr().err


def test_an_optimizer_over_a_copy_of_the_model_is_named():
    torch.manual_seed(0)
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    model = Net(3)
    with TrainingWatch() as watch:
        opt = torch.optim.SGD(copy.deepcopy(model).parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    (finding,) = watch.unwatched
    assert finding.location == "opt (SGD)" and watch.watched == []


def test_an_optimizer_built_after_the_change_is_watched_quietly():
    with TrainingWatch() as watch:
        _fine_tune(optimizer_first=False)
    assert watch.unwatched == []
    assert [label for label, _ in watch.watched] == ["model (Net, Adam)"]
