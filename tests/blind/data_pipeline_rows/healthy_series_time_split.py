"""HEALTHY: a forecasting pipeline split correctly. Forty sensor series (AR(1) processes, each
with its own level) are cut in time BEFORE windowing: windows (length 24, stride 2, target =
the next value) of the first 240 steps of every series form the training set, windows of the
last 80 steps the test set, and no window crosses the cut. Windows overlap within each side
(that is fine); no test window shares a time step with a training window. ``Dataset``
subclasses, the training one wrapped in a DataLoader with ``shuffle=True``.
"""
import torch
from torch.utils.data import DataLoader, Dataset

N_SERIES = 40
LENGTH = 320
CUT = 240
WINDOW = 24
STRIDE = 2


def _series(seed):
    g = torch.Generator().manual_seed(seed)
    level = 0.5 * torch.randn(N_SERIES, 1, generator=g)
    eps = torch.randn(N_SERIES, LENGTH, generator=g)
    x = torch.zeros(N_SERIES, LENGTH)
    for t in range(1, LENGTH):
        x[:, t] = 0.9 * x[:, t - 1] + 0.4 * eps[:, t]
    return x + level


class ForecastWindows(Dataset):
    """Windows of ``series[:, start:stop]``; item = ((WINDOW,) input, next value)."""

    def __init__(self, series, start, stop):
        self.part = series[:, start:stop]
        self.per = (self.part.shape[1] - WINDOW - 1) // STRIDE + 1

    def __len__(self):
        return self.part.shape[0] * self.per

    def __getitem__(self, idx):
        s, k = divmod(idx, self.per)
        w = self.part[s, k * STRIDE:k * STRIDE + WINDOW + 1]
        return w[:-1], w[-1:]


def build(fixed: bool = True):
    series = _series(seed=0)
    train_ds = ForecastWindows(series, 0, CUT)
    test_ds = ForecastWindows(series, CUT, LENGTH)
    loader = DataLoader(train_ds, batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(1))
    return dict(train=loader, test=test_ds)
