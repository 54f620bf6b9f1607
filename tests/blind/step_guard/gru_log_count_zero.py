"""A GRU over log-transformed event counts, where one sequence holds a count of 0: log(0) = -inf.

Bug: the features are ``torch.log(counts)``; counts are at least 1 except one sequence whose
counter was reset (a 0). Its feature is -inf; the GRU's gates saturate, so the forward and the
loss can even stay finite, but the input-weight gradient is 0 * inf = NaN, and AdamW writes NaN
into the weights at the first batch that holds it.
Fixed: ``torch.log1p(counts)`` (the usual transform for counts).
Idiom: a ``train_step(model, batch, optimizer)`` function called from an epoch loop, AdamW with
weight decay, no scheduler.
"""
import torch
from torch import nn

from tests.blind.step_guard._common import execute

KIND = "nonfinite"
BAD_STEPS = frozenset({29, 46, 87, 112})
HIGHER_IS_BETTER = True
TOLERANCE = 0.05          # held-out accuracy, absolute
BAD_SEQ, BAD_T = 77, 9
EPOCHS, BATCH, T = 4, 16, 20


def _counts(n, g):
    """Class 0 rising rate, 1 falling, 2 flat; counts are 1 + Poisson(rate)."""
    y = torch.randint(0, 3, (n,), generator=g)
    t = torch.linspace(0, 1, T)
    base = torch.rand(n, 1, generator=g) * 10 + 3
    slope = torch.where(y == 0, 1.0, torch.where(y == 1, -0.7, 0.0))[:, None]
    rate = base * torch.exp(slope * 1.5 * t)
    return 1 + torch.poisson(rate, generator=g), y


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(1, 24, batch_first=True)
        self.head = nn.Linear(24, 3)

    def forward(self, feats):
        _, h = self.gru(feats.unsqueeze(-1))
        return self.head(h[-1])


def train_step(model, batch, optimizer, loss_fn):
    feats, labels = batch
    optimizer.zero_grad()
    loss = loss_fn(model(feats), labels)
    loss.backward()
    return loss


def run(fixed, *, guard=None, guard_replay=False, **reference):
    g = torch.Generator().manual_seed(21)
    counts, y = _counts(700, g)
    counts[BAD_SEQ, BAD_T] = 0.0
    transform = torch.log1p if fixed else torch.log
    feats = transform(counts)
    xtr, ytr, xte, yte = feats[:500], y[:500], feats[500:], y[500:]
    torch.manual_seed(0)
    model = Classifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    order = torch.Generator().manual_seed(2)

    def train(control):
        model.train()
        for _ in range(EPOCHS):
            perm = torch.randperm(len(xtr), generator=order)
            for i in range(0, len(xtr), BATCH):
                idx = perm[i:i + BATCH]
                loss = train_step(model, (xtr[idx], ytr[idx]), optimizer, loss_fn)
                control.step(optimizer, loss)

    def evaluate():
        model.eval()
        return (model(xte).argmax(1) == yte).float().mean()

    return execute(model, optimizer, train, evaluate, guard=guard, guard_replay=guard_replay,
                   **reference)
