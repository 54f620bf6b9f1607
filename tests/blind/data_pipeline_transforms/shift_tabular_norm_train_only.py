"""TRANSFORM_SHIFT: tabular MLP regressor whose standardisation is applied to the training split only.

Model family: MLP regressor (12 features -> 64 -> 64 -> 1), Adam, plain epoch loop over a
DataLoader. Idiom: a ``Dataset`` subclass taking a ``transform`` callable; the user fits a
``Standardize`` transform (per-feature mean/std) on the training rows and passes it to the
training dataset. The bug: the test dataset is built as ``HousingRows(x_test, y_test)``, with the
default ``transform=None``, so the model is evaluated on raw features (means 20-300, stds 2-80)
while it was trained on standardised ones. The fixed twin passes the same ``transform=scaler``.

Measured (held-out MSE through the test pipeline, lower is better): 8.3e4 (buggy) vs 0.0094
(fixed).
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

EXPECTED = "TRANSFORM_SHIFT"
N_FEATURES = 12


class Standardize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    @classmethod
    def fit(cls, x):
        return cls(x.mean(0), x.std(0))

    def __call__(self, row):
        return (row - self.mean) / self.std


class HousingRows(Dataset):
    def __init__(self, x, y, transform=None):
        self.x, self.y, self.transform = x, y, transform

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        row = self.x[i]
        if self.transform is not None:
            row = self.transform(row)
        return row, self.y[i]


def _make_rows(n, gen):
    loc = torch.linspace(20.0, 300.0, N_FEATURES)
    scale = torch.linspace(2.0, 80.0, N_FEATURES)
    z = torch.randn(n, N_FEATURES, generator=gen)
    x = loc + scale * z
    w = torch.linspace(-1.0, 1.0, N_FEATURES)
    y = z @ w * 0.5 + 0.4 * torch.tanh(z[:, 0] * z[:, 1]) + 0.05 * torch.randn(n, generator=gen)
    return x, y.unsqueeze(1)


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    x_train, y_train = _make_rows(1500, gen)
    x_test, y_test = _make_rows(500, gen)
    scaler = Standardize.fit(x_train)
    train = HousingRows(x_train, y_train, transform=scaler)
    if fixed:
        test = HousingRows(x_test, y_test, transform=scaler)
    else:
        test = HousingRows(x_test, y_test)            # BUG: transform forgotten on the test split
    return dict(train=train, test=test)


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    loader = DataLoader(data["train"], batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(1))
    model = nn.Sequential(nn.Linear(N_FEATURES, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _epoch in range(15):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        xs, ys = zip(*(data["test"][i] for i in range(len(data["test"]))))
        mse = nn.functional.mse_loss(model(torch.stack(xs)), torch.stack(ys)).item()
    return dict(metric=mse, higher_is_better=False,
                evidence=f"held-out MSE through the test pipeline {mse:.4g}")
