"""A tabular LayerNorm MLP whose "price per unit" feature divides by a quantity of 0 in one row.

Bug: the feature is computed as ``price / quantity``; one order row has quantity 0 (a returned
order), so its feature is +inf. LayerNorm of a row holding an inf is NaN, the batch's loss and
gradients are NaN, and SGD writes NaN into every weight: the rest of the run prints NaN.
Fixed: that row's quantity is the 1 it should have been (the data is corrected).
Idiom: a plain loop over a per-epoch ``randperm``, SGD with momentum, no scheduler.
"""
import torch
from torch import nn

from tests.blind.step_guard._common import execute

KIND = "nonfinite"
BAD_STEPS = frozenset({23, 42, 87, 129, 177, 208})
HIGHER_IS_BETTER = True
TOLERANCE = 0.05          # held-out accuracy, absolute
BAD_ROW = 417
EPOCHS, BATCH = 6, 24


def _data(fixed):
    g = torch.Generator().manual_seed(11)
    n = 1200
    price = torch.rand(n, generator=g) * 90 + 10
    quantity = torch.randint(1, 20, (n,), generator=g).float()
    other = torch.randn(n, 8, generator=g) * torch.linspace(0.5, 30, 8) + torch.linspace(-5, 50, 8)
    quantity[BAD_ROW] = 1.0
    x = torch.cat([(price / quantity)[:, None], price[:, None], quantity[:, None], other], dim=1)
    w = torch.randn(11, 3, generator=g)
    z = (x - x[:1000].mean(0)) / x[:1000].std(0)   # the labels come from the true order
    y = (z @ w + 0.3 * torch.randn(n, 3, generator=g)).argmax(1)
    if not fixed:                                   # the row as recorded: a returned order
        x[BAD_ROW, 2] = 0.0
        x[BAD_ROW, 0] = price[BAD_ROW] / x[BAD_ROW, 2]
    return x[:1000], y[:1000], x[1000:], y[1000:]


def run(fixed, *, guard=None, guard_replay=False, **reference):
    torch.manual_seed(0)
    xtr, ytr, xte, yte = _data(fixed)
    model = nn.Sequential(nn.LayerNorm(11), nn.Linear(11, 64), nn.GELU(),
                          nn.LayerNorm(64), nn.Linear(64, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(3)

    def train(control):
        model.train()
        for _ in range(EPOCHS):
            perm = torch.randperm(len(xtr), generator=g)
            for i in range(0, len(xtr) - BATCH + 1, BATCH):
                idx = perm[i:i + BATCH]
                optimizer.zero_grad()
                loss = loss_fn(model(xtr[idx]), ytr[idx])
                loss.backward()
                control.step(optimizer, loss)

    def evaluate():
        model.eval()
        return (model(xte).argmax(1) == yte).float().mean()

    return execute(model, optimizer, train, evaluate, guard=guard, guard_replay=guard_replay,
                   **reference)
