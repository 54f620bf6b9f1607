"""A small MLP trained under a Monitor with whatever ``squash`` its scores go through before
``loss_of``: the shared run of the loss-input checks' tests (what reaches a loss)."""
import torch
from torch import nn

from diagnostics import Monitor


def train_squashed(squash, loss_of, *, steps=120, classes=5):
    """The Monitor's report after ``steps`` Adam steps of ``loss_of(squash(scores), x)`` on
    random inputs ``x`` (32 x 8)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, classes))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    with Monitor(model, optimizer) as monitor:
        for _ in range(steps):
            x = torch.randn(32, 8)
            optimizer.zero_grad()
            loss = loss_of(squash(model(x)), x)
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    return monitor.report()
