"""HEALTHY: 2-layer LSTM sequence regressor with dropout (``nn.LSTM(dropout=...)`` between the
layers and ``nn.Dropout`` before the head), in train mode; gradient accumulation over
unequal micro-batches (44 rows in micro-batches of 12: 12, 12, 12, 8) each weighted by its
share of the rows, done right; SGD with momentum.

Idiom: ``DataLoader(TensorDataset(x, y), batch_size=12, shuffle=False)`` built inside
``train_step``. Dropout draws a different mask per call, so no two steps have the same
gradient; the step is still the objective's gradient for the masks drawn. With the dropout
probability set to 0 (``build(True, p_drop=0.0)``, measured in test_pairs.py) the step's
gradient equals the whole batch's MSE gradient.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

N, MB, T, F_IN, H = 44, 12, 10, 3, 24
MEASURE_KW = {"p_drop": 0.0}


class SeqRegressor(nn.Module):
    def __init__(self, p_drop):
        super().__init__()
        self.lstm = nn.LSTM(F_IN, H, num_layers=2, dropout=p_drop, batch_first=True)
        self.drop = nn.Dropout(p_drop)
        self.head = nn.Linear(H, 1)

    def forward(self, x):
        h, _ = self.lstm(x)
        return self.head(self.drop(h[:, -1])).squeeze(-1)


def make_batch(gen, n=N):
    x = torch.randn(n, T, F_IN, generator=gen)
    y = x[:, :, 0].cumsum(1)[:, -1] * 0.3 + x[:, -1, 1]
    return x, y


def train_step(model, batch, optimizer):
    x, y = batch
    n = x.shape[0]
    model.train()
    optimizer.zero_grad()
    total = 0.0
    for xb, yb in DataLoader(TensorDataset(x, y), batch_size=MB, shuffle=False):
        loss = F.mse_loss(model(xb), yb) * (xb.shape[0] / n)
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def build(fixed: bool = True, p_drop: float = 0.3) -> dict:
    torch.manual_seed(0)
    model = SeqRegressor(p_drop)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    x, y = make_batch(torch.Generator().manual_seed(12))
    return {"model": model, "loss_fn": F.mse_loss, "inputs": x, "targets": y,
            "train_step": train_step, "optimizer": optimizer}
