"""preflight's training steps: LOSS_DIVERGING needs a rise large on the loss's own scale of
progress (its distance from the uninformative output's loss), not any rise; a model already
trained whose tiny loss creeps up under a fresh optimizer passes; the numbers printed differ."""
import torch
from torch import nn

from diagnostics import preflight
from diagnostics.tools.preflight.training import _pair


def _data(rows=64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 8, generator=gen)
    y = (x[:, 0] + x[:, 1] > 0).long()
    return x, y


def _model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 2))


def _item(report):
    return report.item("training steps")


def test_a_trained_model_whose_small_loss_rises_under_a_fresh_optimizer_passes():
    x, y = _data(512)
    model, loss_fn = _model(), nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(30):                  # trained: loss far below -log(1/2)
        for idx in torch.randperm(512, generator=torch.Generator().manual_seed(epoch)).split(64):
            opt.zero_grad()
            loss_fn(model(x[idx]), y[idx]).backward()
            opt.step()
    # a fresh Adam at a large rate: the trained loss rises by a few hundredths
    report = preflight(model, loss_fn, x[:64], y[:64],
                       optimizer=torch.optim.Adam(model.parameters(), lr=0.1))
    item = _item(report)
    codes = [f.code for f in item.findings]
    assert "LOSS_DIVERGING" not in codes and "LOSS_PLATEAU" not in codes
    assert item.status == "PASS" and "already trained" in item.summary   # it did rise


def test_a_fresh_model_blown_up_by_its_learning_rate_still_diverges():
    x, y = _data()
    model = _model()
    report = preflight(model, nn.CrossEntropyLoss(), x, y,
                       optimizer=torch.optim.SGD(model.parameters(), lr=300.0))
    (finding,) = [f for f in _item(report).findings if f.code == "LOSS_DIVERGING"]
    assert finding.severity == "error"
    assert finding.evidence["after"] > finding.evidence["before"] + 0.5 * finding.evidence["room"]
    assert "room to progress" in finding.message


def test_a_loss_rising_by_a_hair_at_chance_is_a_plateau_with_distinct_numbers():
    """A step that ascends at a tiny rate: the loss at chance creeps up by far less than its
    scale; no divergence, a loss that did not go down, printed with digits that differ."""
    x, y = _data()
    model = _model()
    report = preflight(model, nn.CrossEntropyLoss(), x, y,
                       optimizer=torch.optim.SGD(model.parameters(), lr=1e-5, maximize=True))
    (finding,) = [f for f in _item(report).findings if f.code in ("LOSS_DIVERGING",
                                                                   "LOSS_PLATEAU")]
    assert finding.code == "LOSS_PLATEAU"
    before, after = finding.evidence["before"], finding.evidence["after"]
    assert after > before
    shown = finding.message.split("(")[1].split(")")[0].split(" to ")
    assert shown[0] != shown[1] and float(shown[1]) > float(shown[0])


def test_the_pair_shows_enough_digits_to_tell_the_numbers_apart():
    assert _pair(11.4681, 11.4724) == "11.468 to 11.472"
    assert _pair(0.003794, 0.0053) == "0.003794 to 0.0053"
    assert _pair(2.5, 2.5) == "2.5 to 2.5"
    first, second = _pair(1.0, 1.0 + 1e-9).split(" to ")
    assert first != second
