"""PIPELINE_ROWS_MISSING: a DistributedSampler for 4 replicas in a single-process run.

Model family: MLP regressor (6 features -> 128 -> 128 -> 1, SiLU) fitting a smooth nonlinear
response surface, AdamW, a ``Trainer`` class with ``fit()`` that calls ``sampler.set_epoch``.
Idiom: the script was copied from a DDP job and builds
``DistributedSampler(ds, num_replicas=WORLD_SIZE, rank=RANK, shuffle=True, seed=0)`` with
``WORLD_SIZE = 4`` hard-coded at the top; it is run as one process, so every pass yields a
quarter of the rows (200 of 800), a different quarter each epoch. The fixed twin uses
``WORLD_SIZE = 1`` (what ``torch.distributed`` would say in a single process).

Measured (held-out MSE, lower is better): buggy 0.151 vs fixed 0.0248 (target variance 0.289).
"""
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EXPECTED = "PIPELINE_ROWS_MISSING"
RANK = 0


def _surface(n, gen):
    x = torch.rand(n, 6, generator=gen) * 2 - 1
    y = (torch.sin(3 * x[:, 0]) * torch.cos(2 * x[:, 1]) + 0.5 * x[:, 2] * x[:, 3]
         + 0.3 * torch.tanh(4 * x[:, 4]) + 0.05 * torch.randn(n, generator=gen))
    return x, y.unsqueeze(1)


def build(fixed: bool):
    world_size = 1 if fixed else 4              # BUG: WORLD_SIZE = 4 left from the DDP job
    gen = torch.Generator().manual_seed(0)
    ds = TensorDataset(*_surface(800, gen))
    sampler = DistributedSampler(ds, num_replicas=world_size, rank=RANK, shuffle=True, seed=0)
    train = DataLoader(ds, batch_size=32, sampler=sampler)
    return dict(train=train, test=TensorDataset(*_surface(1000, gen)))


class Trainer:
    def __init__(self, model, loader, lr=3e-3):
        self.model, self.loader = model, loader
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)

    def fit(self, epochs):
        for epoch in range(epochs):
            self.loader.sampler.set_epoch(epoch)
            for xb, yb in self.loader:
                loss = nn.functional.mse_loss(self.model(xb), yb)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = nn.Sequential(nn.Linear(6, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(),
                          nn.Linear(128, 1))
    Trainer(model, data["train"]).fit(epochs=25)
    with torch.no_grad():
        x, y = data["test"].tensors
        mse = nn.functional.mse_loss(model(x), y).item()
    return dict(metric=mse, higher_is_better=False,
                evidence=f"held-out MSE {mse:.4f} (target variance {y.var().item():.3f}, "
                         f"{math.ceil(800 / (1 if fixed else 4))} rows per pass)")
