"""preflight's overfit item stops once the batch is plainly being memorised (the loss down to a
fifth of the way from its floor to its start and still falling), short of the target a healthy
model reaches later: the item costs a fraction of the steps on a model whose step is
expensive. A model that cannot learn still runs to the cap and fails; ``overfit_one_batch``
itself still runs to its target."""
import torch
import torch.nn.functional as F
from torch import nn

from diagnostics import overfit_one_batch, preflight

VOCAB, LENGTH = 13, 6


class _TinyLM(nn.Module):
    def __init__(self, *, squash=False, cut=False):
        super().__init__()
        self.embed, self.mix, self.head = nn.Embedding(VOCAB, 16), nn.Linear(16, 16), \
            nn.Linear(16, VOCAB)
        self.squash, self.cut = squash, cut

    def forward(self, ids):
        hidden = torch.tanh(self.mix(self.embed(ids)))
        if self.cut:
            hidden = hidden.detach()            # the body never learns
        logits = self.head(hidden)
        return logits.softmax(-1) if self.squash else logits   # a softmax before CE


def _loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def _step(model, batch, optimizer):
    inputs, targets = batch
    model.train()
    optimizer.zero_grad()
    loss = _loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss


def _batch():
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (12, LENGTH + 1), generator=generator)
    return tokens[:, :-1], tokens[:, 1:]


def test_a_healthy_model_stops_once_memorising_and_passes():
    torch.manual_seed(0)
    model, (x, y) = _TinyLM(), _batch()
    full = overfit_one_batch(model, _loss, x, y, train_step=_step)
    assert full.passed and full.steps is not None and full.stopped_at is None
    report = preflight(model, _loss, x, y, train_step=_step)
    item = report.item("overfit one batch")
    assert item.status == "PASS" and "PASSED, memorising: stopped at step" in item.summary
    stopped = int(item.summary.split("stopped at step ")[1].split()[0])
    assert stopped < full.steps                        # fewer of the user's steps


def test_a_model_that_cannot_learn_still_runs_to_the_cap_and_fails():
    x, y = _batch()
    for broken in (dict(squash=True), dict(cut=True)):
        torch.manual_seed(0)
        report = preflight(_TinyLM(**broken), _loss, x, y, train_step=_step)
        item = report.item("overfit one batch")
        assert item.status == "FAIL" and "FAILED after 200 steps" in item.summary, (broken, item)
        assert [f.code for f in item.findings] == ["OVERFIT_FAILED"]
