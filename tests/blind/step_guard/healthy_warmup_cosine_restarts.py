"""Healthy: a small attention classifier with a linear warm-up, then cosine warm restarts.

At each restart the learning rate jumps from near 0 back to its peak; the loss and the gradient
norm jump with it for a few steps. A schedule doing what it was told is not a bad step.
Idiom: a train_step function, AdamW, ``SequentialLR(LinearLR, CosineAnnealingWarmRestarts)``
stepped every batch.
"""
import torch
from torch import nn

from tests.blind.step_guard._common import execute

KIND = "healthy"
BAD_STEPS = frozenset()
HIGHER_IS_BETTER = True
BASELINE = 0.6            # held-out accuracy; chance is 0.25
STEPS, BATCH, T, WARMUP = 200, 32, 10, 20


def _tokens(n, g):
    """Label = which of 4 marker tokens occurs most often in a sequence over a vocabulary of 12."""
    x = torch.randint(4, 12, (n, T), generator=g)
    marks = torch.randint(0, 4, (n, 4), generator=g)
    x[:, :4] = marks
    x[:, 4] = marks[:, 0]
    x = x[:, torch.randperm(T, generator=g)]
    return x, marks[:, 0]


class AttentionClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(12, 32)
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        h = self.embed(x)
        h = self.norm(h + self.attn(h, h, h, need_weights=False)[0])
        return self.head(h.mean(1))


def train_step(model, batch, optimizer, scheduler, loss_fn, control):
    x, y = batch
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    control.step(optimizer, loss)
    scheduler.step()
    return loss


def run(fixed=True, *, guard=None, guard_replay=False, **reference):
    g = torch.Generator().manual_seed(12)
    x, y = _tokens(1600, g)
    torch.manual_seed(0)
    model = AttentionClassifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [
        torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=WARMUP),
        torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=45, eta_min=1e-5),
    ], milestones=[WARMUP])
    loss_fn = nn.CrossEntropyLoss()

    def train(control):
        model.train()
        for _ in range(STEPS):
            idx = torch.randint(0, 1200, (BATCH,), generator=g)
            train_step(model, (x[idx], y[idx]), optimizer, scheduler, loss_fn, control)

    def evaluate():
        model.eval()
        return (model(x[1200:]).argmax(1) == y[1200:]).float().mean()

    return execute(model, optimizer, train, evaluate, guard=guard, guard_replay=guard_replay,
                   **reference)
