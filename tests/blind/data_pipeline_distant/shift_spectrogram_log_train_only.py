"""TRANSFORM_SHIFT: log-power scaling of spectrograms applied to the training split only.

Model family: small CNN (2 conv + pooling + linear) classifying 1x16x24 power spectrograms of 5
bird-call types (a harmonic stack at a class-specific pitch, log-normal background), Adam,
DataLoaders (batch 64 / 256). Idiom: a ``SpectrogramDataset(power, labels, log_scale=False,
mean=..., std=...)`` whose ``__getitem__`` applies ``torch.log10(power + 1e-6)`` when
``log_scale`` is true and then standardises with the given (training, log-domain) mean/std.
Bug: the test dataset is built without ``log_scale=True`` (the parameter defaults to False), so
test items are raw powers standardised with log-domain constants: values in the hundreds where
training saw about N(0, 1). Fix: ``log_scale=True`` on both splits.

Measured (held-out accuracy, higher is better): buggy 0.818 vs fixed 0.998.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

EXPECTED = "TRANSFORM_SHIFT"
F_BINS, FRAMES = 16, 24


def _power(n, gen):
    y = torch.randint(0, 5, (n,), generator=gen)
    log_p = -1.0 + 1.2 * torch.randn(n, F_BINS, FRAMES, generator=gen)
    for i in range(n):
        base = 1 + 2 * int(y[i])
        for h in (base, base + 5):
            if h < F_BINS:
                log_p[i, h] += 1.5
    return (10 ** log_p).unsqueeze(1), y


class SpectrogramDataset(Dataset):
    def __init__(self, power, labels, log_scale=False, mean=0.0, std=1.0):
        self.power, self.labels = power, labels
        self.log_scale, self.mean, self.std = log_scale, mean, std

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = self.power[i]
        if self.log_scale:
            x = torch.log10(x + 1e-6)
        return (x - self.mean) / self.std, self.labels[i]


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    p_train, y_train = _power(800, gen)
    p_test, y_test = _power(400, gen)
    logp = torch.log10(p_train + 1e-6)
    mean, std = logp.mean().item(), logp.std().item()
    train = SpectrogramDataset(p_train, y_train, log_scale=True, mean=mean, std=std)
    if fixed:
        test = SpectrogramDataset(p_test, y_test, log_scale=True, mean=mean, std=std)
    else:                                              # BUG: log_scale left at its default
        test = SpectrogramDataset(p_test, y_test, mean=mean, std=std)
    return dict(train=train, test=test)


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d((4, 1)), nn.Flatten(), nn.Linear(128, 5))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    loader = DataLoader(data["train"], batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(1))
    for _epoch in range(6):
        for xb, yb in loader:
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    correct = total = 0
    with torch.no_grad():
        for xb, yb in DataLoader(data["test"], batch_size=256):
            correct += (model(xb).argmax(1) == yb).sum().item()
            total += len(yb)
    acc = correct / total
    return dict(metric=acc, higher_is_better=True, evidence=f"held-out accuracy {acc:.3f}")
