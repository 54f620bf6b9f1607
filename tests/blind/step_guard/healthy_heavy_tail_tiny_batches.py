"""Healthy: linear regression on heavy-tailed (Student-t, 3 degrees of freedom) but valid data,
batches of 2 rows.

A batch of two can hold a 10-sigma row; its gradient is then tens of times the median. The data
is right (heavy tails are the distribution, not a unit error), so the step must be applied.
Idiom: a plain loop over a per-epoch ``randperm``, Huber loss (``nn.SmoothL1Loss``), plain SGD.
"""
import torch
from torch import nn

from tests.blind.step_guard._common import execute

KIND = "healthy"
BAD_STEPS = frozenset()
HIGHER_IS_BETTER = False
BASELINE = 1.0            # held-out MSE of the untrained model is above this
EPOCHS, BATCH = 2, 2


def _data():
    g = torch.Generator().manual_seed(3)
    t = torch.distributions.StudentT(3.0)
    torch.manual_seed(123)
    x = t.sample((700, 6))
    w = torch.tensor([1.0, -0.5, 0.25, 0.0, 0.75, -1.0])
    y = x @ w + 0.3 * t.sample((700,))
    return x[:500], y[:500], x[500:], (x[500:] @ w), g


def run(fixed=True, *, guard=None, guard_replay=False, **reference):
    xtr, ytr, xte, fte, g = _data()
    torch.manual_seed(0)
    model = nn.Linear(6, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
    loss_fn = nn.SmoothL1Loss()

    def train(control):
        for _ in range(EPOCHS):
            perm = torch.randperm(len(xtr), generator=g)
            for i in range(0, len(xtr), BATCH):
                idx = perm[i:i + BATCH]
                optimizer.zero_grad()
                loss = loss_fn(model(xtr[idx]).squeeze(-1), ytr[idx])
                loss.backward()
                control.step(optimizer, loss)

    def evaluate():
        return ((model(xte).squeeze(-1) - fte) ** 2).mean()

    return execute(model, optimizer, train, evaluate, guard=guard, guard_replay=guard_replay,
                   **reference)
