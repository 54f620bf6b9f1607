"""preflight's "training mode" item: a train_step that trains with dropout or batch norm in eval
mode (model.eval() inside it for a validation and no model.train() after, or a model left in
eval mode by earlier code and never put back) is named at train_step; its twin that calls
model.train(), a model whose mode changes nothing and a deliberately frozen batch norm are
quiet."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from diagnostics import preflight

CLASSES = 3


class _Tagger(nn.Module):
    """A 2-layer LSTM with dropout between its layers: dropout= of the LSTM itself."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 8)
        self.lstm = nn.LSTM(8, 16, num_layers=2, dropout=0.3, batch_first=True)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out[:, -1])


def _dropout_mlp():
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, CLASSES))


def _batchnorm_cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 6 * 6, CLASSES))


def _plain_mlp():
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, CLASSES))


MODELS = {"dropout MLP": (_dropout_mlp, lambda g: torch.randn(24, 8, generator=g)),
          "BatchNorm CNN": (_batchnorm_cnn, lambda g: torch.randn(24, 1, 6, 6, generator=g)),
          "LSTM dropout=": (_Tagger, lambda g: torch.randint(0, 11, (24, 5), generator=g))}


def _setup(name):
    torch.manual_seed(0)
    build, inputs = MODELS[name]
    generator = torch.Generator().manual_seed(1)
    return build(), inputs(generator), torch.randint(0, CLASSES, (24,), generator=generator)


def _step(*, validate, calls_train):
    """zero_grad, forward, backward, step; ``validate``: then model.eval() and a pass without
    gradients; ``calls_train``: model.train() first."""
    def train_step(model, batch, optimizer):
        inputs, targets = batch
        if calls_train:
            model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        if validate == "no_grad":
            model.eval()
            with torch.no_grad():
                model(inputs[:4])
        elif validate == "eval":            # eval() for a metric read later, no pass at all
            model.eval()
        return loss
    return train_step


def _mode_item(report):
    return report.item("training mode")


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("validate", ["no_grad", "eval"])
def test_a_step_that_leaves_the_model_in_eval_mode_is_named_at_train_step(name, validate):
    model, x, y = _setup(name)
    report = preflight(model, F.cross_entropy, x, y,
                       train_step=_step(validate=validate, calls_train=False))
    item = _mode_item(report)
    assert item.status == "FAIL", str(report)
    found = [f for f in report.findings if f.code == "TRAINING_IN_EVAL_MODE"]
    assert len(found) == 1 and found[0] in item.findings, str(report)   # once, in its item
    finding = found[0]
    assert finding.location == "train_step" and finding.severity == "warning"
    assert finding.evidence["first_call_in_train_mode"] and finding.evidence["trailing"] >= 4
    word = {"dropout MLP": "dropout", "BatchNorm CNN": "batch norm",
            "LSTM dropout=": "the recurrent net's dropout"}[name]
    assert f"with {word} off" in finding.message and "model.train()" in finding.suggestion
    assert model.training and not model._forward_pre_hooks     # the user's model as it was


@pytest.mark.parametrize("name", list(MODELS))
def test_a_model_left_in_eval_mode_and_never_put_back_is_named(name):
    model, x, y = _setup(name)
    model.eval()                      # an earlier evaluation; train_step never calls train()
    report = preflight(model, F.cross_entropy, x, y,
                       train_step=_step(validate=None, calls_train=False))
    finding = next(f for f in _mode_item(report).findings)
    assert finding.code == "TRAINING_IN_EVAL_MODE" and finding.location == "train_step"
    assert not finding.evidence["first_call_in_train_mode"]
    assert "was in eval mode when train_step was called" in finding.message
    assert not model.training                                   # left as it was given


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("validate", ["no_grad", "eval", None])
def test_the_twin_that_calls_model_train_is_quiet(name, validate):
    model, x, y = _setup(name)
    if validate is None:
        model.eval()
    report = preflight(model, F.cross_entropy, x, y,
                       train_step=_step(validate=validate, calls_train=True))
    item = _mode_item(report)
    assert item.status == "PASS" and item.findings == [], str(report)
    assert "in train mode" in item.summary
    assert "TRAINING_IN_EVAL_MODE" not in [f.code for f in report.findings]


def test_a_model_whose_mode_changes_nothing_is_quiet():
    torch.manual_seed(0)
    model, x, y = _plain_mlp(), torch.randn(24, 8), torch.randint(0, CLASSES, (24,))
    model.eval()
    report = preflight(model, F.cross_entropy, x, y,
                       train_step=_step(validate="no_grad", calls_train=False))
    item = _mode_item(report)
    assert item.status == "PASS" and "changes nothing" in item.summary, str(report)
    assert "TRAINING_IN_EVAL_MODE" not in [f.code for f in report.findings]


def test_a_deliberately_frozen_batch_norm_is_quiet():
    """Batch norm put in eval mode on purpose (fine-tuning), the model itself in train mode."""
    model, x, y = _setup("BatchNorm CNN")

    def step(model, batch, optimizer):
        model.train()
        model[1].eval()
        return _step(validate=None, calls_train=False)(model, batch, optimizer)
    report = preflight(model, F.cross_entropy, x, y, train_step=step)
    assert _mode_item(report).status == "PASS", str(report)


def test_without_train_step_there_is_no_training_mode_item():
    model, x, y = _setup("dropout MLP")
    report = preflight(model, F.cross_entropy, x, y)
    assert "training mode" not in [item.name for item in report.items]
