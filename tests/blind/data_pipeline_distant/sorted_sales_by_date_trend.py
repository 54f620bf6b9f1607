"""LABELS_SORTED: a regression loader walking a sales table in date order while sales trend up.

Model family: MLP regressor (day-of-week one-hot, month sin/cos, promo flag, scaled time index
-> 64 -> 64 -> 1) for a shop's daily sales over three years, Adam, a ``Trainer`` class.
Idiom: the rows are Python dict records read from an export sorted by ``"date"``; a
``SalesDays(records)`` Dataset; ``DataLoader(ds, batch_size=30, shuffle=False)`` -- each batch
is one month, and sales grow by 3.0 over the period (target std 0.9), so every epoch ends
on the highest sales and the model leans towards the last months. The held-out days are a
random 20% of the same three years (interpolation, not forecasting). Fix: ``shuffle=True``.

Measured (held-out MSE, lower is better): buggy 0.151 vs fixed 0.0146 (target variance 0.81).
"""
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

EXPECTED = "LABELS_SORTED"
DAYS = 1095


def _records(gen):
    recs = []
    for d in range(DAYS):
        promo = float(torch.rand((), generator=gen) < 0.2)
        dow = d % 7
        sales = (3.0 * d / DAYS + 0.5 * math.sin(2 * math.pi * d / 365) + 0.4 * (dow >= 5)
                 + 0.6 * promo + 0.1 * float(torch.randn((), generator=gen)))
        recs.append({"date": d, "dow": dow, "promo": promo, "sales": sales})
    perm = torch.randperm(DAYS, generator=gen)
    test_days = set(perm[:DAYS // 5].tolist())
    train = sorted((r for r in recs if r["date"] not in test_days), key=lambda r: r["date"])
    test = [r for r in recs if r["date"] in test_days]
    return train, test


class SalesDays(Dataset):
    def __init__(self, records):
        self.records = records

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        r = self.records[i]
        dow = torch.zeros(7)
        dow[r["dow"]] = 1.0
        ang = 2 * math.pi * r["date"] / 365
        x = torch.cat([dow, torch.tensor([math.sin(ang), math.cos(ang), r["promo"],
                                          2 * r["date"] / DAYS - 1])])
        return x, torch.tensor([r["sales"]])


def build(fixed: bool):
    train_recs, test_recs = _records(torch.Generator().manual_seed(0))
    loader = DataLoader(SalesDays(train_recs), batch_size=30, shuffle=fixed,   # BUG: False
                        generator=torch.Generator().manual_seed(1))
    return dict(train=loader, test=SalesDays(test_recs))


class Trainer:
    def __init__(self, model, lr=1e-2):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=lr)

    def fit(self, loader, epochs):
        for _ in range(epochs):
            for xb, yb in loader:
                loss = nn.functional.mse_loss(self.model(xb), yb)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = nn.Sequential(nn.Linear(11, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 1))
    Trainer(model).fit(data["train"], epochs=10)
    with torch.no_grad():
        xb, yb = next(iter(DataLoader(data["test"], batch_size=len(data["test"]))))
        mse = nn.functional.mse_loss(model(xb), yb).item()
    return dict(metric=mse, higher_is_better=False,
                evidence=f"held-out MSE {mse:.4f} (target variance {yb.var().item():.3f})")
