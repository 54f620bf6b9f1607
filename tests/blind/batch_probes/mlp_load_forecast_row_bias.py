"""An MLP forecasting hourly electricity load from float features (a raw (B, 6) tensor input:
temperature, hour of day as sin/cos, weekday flags); its hidden bias was declared with the
batch size, ``nn.Parameter(torch.zeros(BATCH, HIDDEN))``, and added as ``h + self.row_bias[:
h.shape[0]]`` -- one learned bias per batch row -- where one per hidden unit was meant. The
training DataLoader is unshuffled, one day (24 hourly rows in order) per batch, so row i is
always hour i and the table learns the hour shortcut. Epochs over a DataLoader, Adam.
Bug real: MSE on test hours served in shuffled batches of 24."""
import copy
import functools
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.blind.batch_probes._common import seeded

EXPECTED = "BATCH_POSITION_DEPENDENT"
BATCH, HIDDEN = 24, 32


def make_days(days, gen):
    """Rows in time order, 24 per day; load = daily profile (morning and evening peaks) +
    heating/cooling from temperature + weekend drop + noise."""
    hour = torch.arange(24).repeat(days).float()
    day = torch.arange(days).repeat_interleave(24)
    weekend = ((day % 7) >= 5).float()
    temp = 12 + 8 * torch.randn(days, generator=gen).repeat_interleave(24) \
        - 4 * torch.cos(2 * math.pi * (hour - 15) / 24)
    profile = torch.exp(-((hour - 8) ** 2) / 4) + 1.3 * torch.exp(-((hour - 19) ** 2) / 6)
    load = 2 * profile + 0.04 * (temp - 16) ** 2 / 4 - 0.6 * weekend \
        + 0.05 * torch.randn(len(hour), generator=gen)
    x = torch.stack([(temp - 12) / 8, torch.sin(2 * math.pi * hour / 24),
                     torch.cos(2 * math.pi * hour / 24), weekend,
                     torch.sin(4 * math.pi * hour / 24), torch.cos(4 * math.pi * hour / 24)], 1)
    return x, load.unsqueeze(1)


class LoadMLP(nn.Module):
    def __init__(self, fixed):
        super().__init__()
        self.fixed = fixed
        self.inp = nn.Linear(6, HIDDEN, bias=False)
        self.row_bias = nn.Parameter(torch.zeros(HIDDEN) if fixed else torch.zeros(BATCH, HIDDEN))
        self.body = nn.Sequential(nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                                  nn.Linear(HIDDEN, 1))

    def forward(self, x):
        h = self.inp(x)
        h = h + (self.row_bias if self.fixed else self.row_bias[: h.shape[0]])
        return self.body(h)


@functools.lru_cache(maxsize=None)
def _fit(fixed):
    torch.manual_seed(0)
    gen = seeded(41)
    x, y = make_days(60, gen)
    model = LoadMLP(fixed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH, shuffle=False)
    for _epoch in range(30):
        for xb, yb in loader:
            loss = F.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    return model, make_days(20, seeded(42))


def build(fixed):
    model, (x, _y) = _fit(fixed)
    return dict(model=copy.deepcopy(model), inputs=x[:BATCH].clone(), options={})


def train(fixed):
    model, (x, y) = _fit(fixed)
    order = torch.randperm(len(y), generator=seeded(43))
    with torch.no_grad():
        in_order = torch.cat([model(x[s:s + BATCH]) for s in range(0, len(y), BATCH)])
        pred = torch.cat([model(x[order[s:s + BATCH]]) for s in range(0, len(y), BATCH)])
    shuffled, in_order = F.mse_loss(pred, y[order]).item(), F.mse_loss(in_order, y).item()
    return dict(metric=shuffled, higher_is_better=False,
                evidence=dict(shuffled_mse=round(shuffled, 4), day_batches_in_order_mse=round(
                    in_order, 4), target_var=round(y.var().item(), 3)))
