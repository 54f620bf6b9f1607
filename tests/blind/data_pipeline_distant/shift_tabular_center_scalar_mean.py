"""TRANSFORM_SHIFT: the evaluation transform centres with one scalar mean instead of the
per-feature means.

Model family: MLP regressor with Dropout (5 weather features -> 64 -> 64 -> 1) predicting a
building's heating load, SGD with Nesterov momentum, a ``fit`` function over DataLoader epochs.
Idiom: records are Python dicts (``{"temp": .., "humidity": .., "hour": .., "wind": ..,
"pressure": ..}``) turned into tensors by a ``WeatherRecords`` Dataset with a ``transform``
callable; the transform is a ``Center(mean, std)`` object. The training script builds it from
``stats = fit_stats(x_train)`` (per-feature); the evaluation script rebuilds it with
``fit_stats(x_train, per_feature=False)`` (a helper argument meant for images): one scalar mean
(about 220, dominated by pressure ~1013) and one scalar std. Test features are then off by
hundreds of their standard deviations. Fix: the same per-feature stats for both splits.

Measured (held-out MSE, lower is better): buggy 0.778 vs fixed 0.0163 (target variance 0.664).
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

EXPECTED = "TRANSFORM_SHIFT"
KEYS = ("temp", "humidity", "hour", "wind", "pressure")


def _records(n, gen):
    temp = 12 + 8 * torch.randn(n, generator=gen)
    hum = 60 + 15 * torch.randn(n, generator=gen)
    hour = torch.randint(0, 24, (n,), generator=gen).float()
    wind = (5 + 3 * torch.randn(n, generator=gen)).abs()
    pres = 1013 + 10 * torch.randn(n, generator=gen)
    load = (-0.08 * (temp - 12) + 0.01 * (hum - 60) + 0.4 * torch.cos(2 * torch.pi * hour / 24)
            + 0.05 * (wind - 5) - 0.02 * (pres - 1013) + 0.1 * torch.randn(n, generator=gen))
    return [dict(zip(KEYS, vals), load=float(l))
            for vals, l in zip(torch.stack([temp, hum, hour, wind, pres], 1).tolist(),
                               load.tolist())]


def _matrix(recs):
    return torch.tensor([[r[k] for k in KEYS] for r in recs])


def fit_stats(x, per_feature=True):
    if per_feature:
        return x.mean(0), x.std(0)
    return x.mean(), x.std()


class Center:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, x):
        return (x - self.mean) / self.std


class WeatherRecords(Dataset):
    def __init__(self, recs, transform):
        self.x = _matrix(recs)
        self.y = torch.tensor([[r["load"]] for r in recs])
        self.transform = transform

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.transform(self.x[i]), self.y[i]


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    train_recs, test_recs = _records(1500, gen), _records(500, gen)
    x_train = _matrix(train_recs)
    train = WeatherRecords(train_recs, Center(*fit_stats(x_train)))
    if fixed:
        test = WeatherRecords(test_recs, Center(*fit_stats(x_train)))
    else:                                           # BUG: one scalar mean/std for all columns
        test = WeatherRecords(test_recs, Center(*fit_stats(x_train, per_feature=False)))
    return dict(train=train, test=test)


def fit(model, loader, epochs):
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, nesterov=True)
    for _ in range(epochs):
        model.train()
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = nn.Sequential(nn.Linear(5, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 64),
                          nn.ReLU(), nn.Linear(64, 1))
    fit(model, DataLoader(data["train"], batch_size=50, shuffle=True,
                          generator=torch.Generator().manual_seed(1)), epochs=15)
    model.eval()
    with torch.no_grad():
        xb, yb = next(iter(DataLoader(data["test"], batch_size=500)))
        mse = nn.functional.mse_loss(model(xb), yb).item()
    return dict(metric=mse, higher_is_better=False,
                evidence=f"held-out MSE {mse:.4g} (target variance {yb.var().item():.3f})")
