"""A small transformer-encoder classifier on token ids (a raw (B, T) tensor input), whose
positional embedding was written for the seq-first layout: ``self.pos(torch.arange(x.size(0)))
.unsqueeze(1)`` -- one embedding per batch row -- while the batch is batch-first; the fix indexes
``x.size(1)``. A plain loop over shuffled mini-batches, Adam.
Bug real: accuracy (the label is where in the sequence a marker token sits), in shuffled
batches of 50."""
import copy
import functools

import torch
import torch.nn.functional as F
from torch import nn

from tests.blind.batch_probes._common import seeded

EXPECTED = "BATCH_POSITION_DEPENDENT"
VOCAB, T, MARKER = 20, 10, 1


def make_data(n, gen):
    """Random tokens 2..19 with one marker token; label: the marker is in the first half."""
    x = torch.randint(2, VOCAB, (n, T), generator=gen)
    where = torch.randint(0, T, (n,), generator=gen)
    x[torch.arange(n), where] = MARKER
    return x, (where < T // 2).long()


class MarkerClassifier(nn.Module):
    def __init__(self, fixed, dim=32, max_len=64):
        super().__init__()
        self.fixed = fixed
        self.tok = nn.Embedding(VOCAB, dim)
        self.pos = nn.Embedding(max_len, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(dim, 2)

    def forward(self, x):
        if self.fixed:
            pos = self.pos(torch.arange(x.size(1), device=x.device)).unsqueeze(0)
        else:
            pos = self.pos(torch.arange(x.size(0), device=x.device)).unsqueeze(1)
        return self.head(self.encoder(self.tok(x) + pos).mean(1))


@functools.lru_cache(maxsize=None)
def _fit(fixed):
    torch.manual_seed(0)
    gen = seeded(31)
    x, y = make_data(1536, gen)
    model = MarkerClassifier(fixed)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for _epoch in range(6):
        order = torch.randperm(len(y), generator=gen)
        for s in range(0, len(y), 32):
            i = order[s:s + 32]
            loss = F.cross_entropy(model(x[i]), y[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    return model, make_data(400, seeded(32))


def build(fixed):
    model, (x, _y) = _fit(fixed)
    return dict(model=copy.deepcopy(model), inputs=x[:16].clone(), options={})


def train(fixed):
    model, (x, y) = _fit(fixed)
    order = torch.randperm(len(y), generator=seeded(33))
    with torch.no_grad():
        pred = torch.cat([model(x[order[s:s + 50]]).argmax(1) for s in range(0, len(y), 50)])
    acc = (pred == y[order]).float().mean().item()
    return dict(metric=acc, higher_is_better=True, evidence=dict(shuffled_batch50_acc=round(acc, 3)))
