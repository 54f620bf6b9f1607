"""A user/item embedding model of watch time in hours where one log row is in milliseconds.

Bug: one interaction's watch time is 5.4e6 (ms) among 0-4 hours. Its batch's gradient is about
1e6 times the usual; RMSprop's square average takes it in, the update of that step moves every
coordinate of the head by about ten learning rates, and afterwards the inflated square average
keeps the steps tiny for hundreds of steps: the model never fits.
Fixed: the row converted to hours (1.5).
Idiom: a ``TensorDataset`` and a shuffling ``DataLoader`` over epochs, index tensors as inputs,
RMSprop, a model with two embedding tables and an MLP head.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.blind.step_guard._common import execute

KIND = "spike"
BAD_STEPS = frozenset({22, 88, 112, 197})
HIGHER_IS_BETTER = False
TOLERANCE = 0.25          # held-out MSE, relative
BAD_ROW = 2222
USERS, ITEMS, DIM = 60, 40, 8
EPOCHS, BATCH = 4, 64


def _logs(fixed):
    g = torch.Generator().manual_seed(13)
    n = 4000
    u_true, i_true = torch.randn(USERS, 3, generator=g), torch.randn(ITEMS, 3, generator=g)
    users = torch.randint(0, USERS, (n,), generator=g)
    items = torch.randint(0, ITEMS, (n,), generator=g)
    hours = 2.0 + 0.6 * (u_true[users] * i_true[items]).sum(1) \
        + 0.1 * torch.randn(n, generator=g)
    hours = hours.clamp(0.0, 4.0)
    hours[BAD_ROW] = 1.5 if fixed else 1.5 * 3.6e6
    return (users[:3400], items[:3400], hours[:3400]), (users[3400:], items[3400:], hours[3400:])


class WatchTime(nn.Module):
    def __init__(self):
        super().__init__()
        self.user = nn.Embedding(USERS, DIM)
        self.item = nn.Embedding(ITEMS, DIM)
        self.head = nn.Sequential(nn.Linear(2 * DIM, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, users, items):
        return self.head(torch.cat([self.user(users), self.item(items)], -1)).squeeze(-1)


def run(fixed, *, guard=None, guard_replay=False, **reference):
    train_rows, test_rows = _logs(fixed)
    torch.manual_seed(0)
    model = WatchTime()
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-2)
    loss_fn = nn.MSELoss()
    loader = DataLoader(TensorDataset(*train_rows), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(1))

    def train(control):
        model.train()
        for _ in range(EPOCHS):
            for users, items, hours in loader:
                optimizer.zero_grad()
                loss = loss_fn(model(users, items), hours)
                loss.backward()
                control.step(optimizer, loss)

    def evaluate():
        model.eval()
        users, items, hours = test_rows
        return loss_fn(model(users, items), hours)

    return execute(model, optimizer, train, evaluate, guard=guard, guard_replay=guard_replay,
                   **reference)
