"""HEALTHY: a recommender whose sparse embeddings are trained by a second optimizer (SparseAdam).

A NeuMF-style rating model: user and item ``nn.Embedding(sparse=True)`` tables give a
dot-product term plus an MLP correction on their concatenation. Sparse gradients need
``torch.optim.SparseAdam``, so the embeddings are in their own optimizer and the dense MLP in
``AdamW``, the standard split; the loop clears and steps both every batch. The Monitor is given
the main (dense) optimizer, as its single ``optimizer=`` asks. Every parameter is held by an
optimizer that steps: nothing here is a bug.

Today the Monitor raises no warning or error here, but reports an info MONITOR_ERROR: it turns
off its GradientsProbe at step 0 ("reshape is not implemented for sparse tensors").

Measured (held-out rating MSE; predicting the mean scores 0.97): 0.023.
"""
import torch
from torch import nn

EXPECTED = None

USERS = 300
ITEMS = 200
RANK = 4


class RatingModel(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.users = nn.Embedding(USERS, dim, sparse=True)
        self.items = nn.Embedding(ITEMS, dim, sparse=True)
        self.mlp = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, 1))
        nn.init.normal_(self.users.weight, std=0.1)
        nn.init.normal_(self.items.weight, std=0.1)

    def forward(self, user, item):
        u, v = self.users(user), self.items(item)
        return (u * v).sum(1) + self.mlp(torch.cat([u, v], 1)).squeeze(1)


def run(*, fixed: bool = True, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(19)
    user_f = torch.randn(USERS, RANK, generator=gen)
    item_f = torch.randn(ITEMS, RANK, generator=gen)
    n = 22000
    user = torch.randint(0, USERS, (n,), generator=gen)
    item = torch.randint(0, ITEMS, (n,), generator=gen)
    noise = 0.1 * torch.randn(n, generator=gen)
    rating = (user_f[user] * item_f[item]).sum(1) / RANK ** 0.5 + noise
    train, test = slice(0, 20000), slice(20000, n)

    model = RatingModel()
    sparse_optimizer = torch.optim.SparseAdam(
        list(model.users.parameters()) + list(model.items.parameters()), lr=3e-2)
    optimizer = torch.optim.AdamW(model.mlp.parameters(), lr=3e-3, weight_decay=1e-4)
    loss_fn = nn.MSELoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)
    model.train()
    for epoch in range(6):
        order = torch.randperm(20000, generator=gen)
        for start in range(0, 20000, 256):
            idx = order[start:start + 256]
            optimizer.zero_grad()
            sparse_optimizer.zero_grad()
            loss = loss_fn(model(user[idx], item[idx]), rating[idx])
            loss.backward()
            optimizer.step()
            sparse_optimizer.step()
            if mon is not None:
                mon.step(loss)

    model.eval()
    with torch.no_grad():
        error = loss_fn(model(user[test], item[test]), rating[test]).item()
        baseline = ((rating[test] - rating[train].mean()) ** 2).mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": error, "baseline": baseline, "higher_is_better": False}
