"""A matrix-factorisation rating model (dict inputs ``user_ids``, ``item_ids``) whose user and
item bias tables are looked up with ``torch.arange(user_ids.shape[0])`` -- the example's row in
the batch -- where the ids were meant (``self.user_bias(user_ids)``). Epochs of shuffled
mini-batches of 256, Adagrad, MSE on ratings.
Bug real: RMSE on held-out ratings in shuffled batches of 256 (users' and items' own offsets
are most of the signal)."""
import copy
import functools

import torch
import torch.nn.functional as F
from torch import nn

from tests.blind.batch_probes._common import seeded

EXPECTED = "BATCH_POSITION_DEPENDENT"
USERS, ITEMS, RANK, BATCH = 200, 150, 4, 256


def make_world(gen):
    return dict(u_off=torch.randn(USERS, generator=gen) * 0.8,
                i_off=torch.randn(ITEMS, generator=gen) * 0.8,
                u_vec=torch.randn(USERS, RANK, generator=gen) * 0.5,
                i_vec=torch.randn(ITEMS, RANK, generator=gen) * 0.5)


def sample(world, n, gen):
    u = torch.randint(0, USERS, (n,), generator=gen)
    i = torch.randint(0, ITEMS, (n,), generator=gen)
    r = 3.5 + world["u_off"][u] + world["i_off"][i] \
        + (world["u_vec"][u] * world["i_vec"][i]).sum(1) + 0.2 * torch.randn(n, generator=gen)
    return u, i, r


class MF(nn.Module):
    def __init__(self, fixed, max_batch=BATCH):
        super().__init__()
        self.fixed = fixed
        self.user = nn.Embedding(USERS, RANK)
        self.item = nn.Embedding(ITEMS, RANK)
        self.user_bias = nn.Embedding(USERS if fixed else max(USERS, max_batch), 1)
        self.item_bias = nn.Embedding(ITEMS if fixed else max(ITEMS, max_batch), 1)
        for table in (self.user_bias, self.item_bias):
            nn.init.zeros_(table.weight)
        self.mean = nn.Parameter(torch.tensor(3.5))

    def forward(self, user_ids, item_ids):
        if self.fixed:
            ub, ib = self.user_bias(user_ids), self.item_bias(item_ids)
        else:
            rows = torch.arange(user_ids.shape[0], device=user_ids.device)
            ub, ib = self.user_bias(rows), self.item_bias(rows)
        dot = (self.user(user_ids) * self.item(item_ids)).sum(-1)
        return self.mean + ub.squeeze(-1) + ib.squeeze(-1) + dot


@functools.lru_cache(maxsize=None)
def _fit(fixed):
    torch.manual_seed(0)
    gen = seeded(51)
    world = make_world(gen)
    u, i, r = sample(world, 12000, gen)
    model = MF(fixed)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    for _epoch in range(12):
        order = torch.randperm(len(r), generator=gen)
        for s in range(0, len(r), BATCH):
            b = order[s:s + BATCH]
            loss = F.mse_loss(model(u[b], i[b]), r[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    return model, sample(world, 2000, seeded(52))


def build(fixed):
    model, (u, i, _r) = _fit(fixed)
    return dict(model=copy.deepcopy(model),
                inputs={"user_ids": u[:32].clone(), "item_ids": i[:32].clone()}, options={})


def train(fixed):
    model, (u, i, r) = _fit(fixed)
    order = torch.randperm(len(r), generator=seeded(53))
    with torch.no_grad():
        pred = torch.cat([model(u[order[s:s + BATCH]], i[order[s:s + BATCH]])
                          for s in range(0, len(r), BATCH)])
    rmse = F.mse_loss(pred, r[order]).sqrt().item()
    return dict(metric=rmse, higher_is_better=False,
                evidence=dict(shuffled_rmse=round(rmse, 3), rating_std=round(r.std().item(), 3)))
