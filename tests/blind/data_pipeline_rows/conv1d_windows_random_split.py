"""Temporal CNN (two Conv1d layers, global average pooling, MLP head) fault classifier on
vibration time series; each machine's recording is cut into
overlapping sliding windows (length 32, stride 4) by a ``Dataset`` subclass; the windows are
split with ``train_test_split``-style index shuffling into two ``Subset``s; a trainer class
over DataLoader epochs, Adam.

Each machine has one fault class (its main frequency band, which overlaps between classes)
and its own signature (sensor offset and gain, a second tone, noise level) that says nothing
about the class.

Bug: the split shuffles WINDOW indices, so overlapping windows of one machine land on both
sides; the network recognises the machine it has seen and the reported test accuracy is
inflated well above its accuracy on new machines. Fix: shuffle and split the MACHINES, then
take the windows of each side.

Measured (reported test accuracy vs accuracy on windows of 60 new machines; 45 machines, 9 of them in the fixed test split):
buggy 0.830 vs 0.483 (gap +0.347); fixed 0.358 vs 0.495 (gap -0.137, not inflated).
"""
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, Subset

EXPECTED = "DATA_LEAKAGE"
KEYWORD = "near-duplicate"
N_MACHINES = 45
LENGTH = 300
WINDOW = 32
STRIDE = 4
CLASSES = 3
JITTER = 0.02


def _recordings(n, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % CLASSES
    t = torch.arange(LENGTH, dtype=torch.float32)
    series = []
    for m in range(n):
        f = 0.05 + 0.025 * int(labels[m]) + JITTER * float(torch.randn(1, generator=g))
        offset = 2 * float(torch.rand(1, generator=g)) - 1
        g2 = 0.12 + 0.2 * float(torch.rand(1, generator=g))
        amp = 0.5 + float(torch.rand(1, generator=g))
        ph1, ph2 = (6.283 * torch.rand(2, generator=g)).tolist()
        noise = 0.1 + 0.2 * float(torch.rand(1, generator=g))
        x = (torch.sin(2 * math.pi * f * t + ph1) + 0.3 * torch.sin(2 * math.pi * g2 * t + ph2)
             + noise * torch.randn(LENGTH, generator=g))
        x = amp * x + offset
        series.append(x)
    return torch.stack(series), labels


class Windows(Dataset):
    """All windows of a set of recordings; item = ((WINDOW, 1) tensor, label)."""

    def __init__(self, series, labels):
        self.series, self.labels = series, labels
        self.per = (LENGTH - WINDOW) // STRIDE + 1
        self.machine_of = torch.arange(len(series)).repeat_interleave(self.per)

    def __len__(self):
        return len(self.series) * self.per

    def __getitem__(self, idx):
        m, k = divmod(idx, self.per)
        w = self.series[m, k * STRIDE:k * STRIDE + WINDOW]
        return w.unsqueeze(-1), self.labels[m]


def build(fixed: bool):
    series, labels = _recordings(N_MACHINES, seed=0)
    ds = Windows(series, labels)
    g = torch.Generator().manual_seed(1)
    if fixed:
        machines = torch.randperm(N_MACHINES, generator=g)
        test_m = set(machines[:N_MACHINES // 5].tolist())
        test_idx = [i for i in range(len(ds)) if int(ds.machine_of[i]) in test_m]
        train_idx = [i for i in range(len(ds)) if int(ds.machine_of[i]) not in test_m]
    else:
        perm = torch.randperm(len(ds), generator=g).tolist()                 # BUG: windows
        n_test = len(ds) // 5
        test_idx, train_idx = perm[:n_test], perm[n_test:]
    return dict(train=Subset(ds, train_idx), test=Subset(ds, test_idx))


class TemporalCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(1, 32, 7, padding=3), nn.ReLU(), nn.Conv1d(32, 32, 7, padding=3), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 64), nn.ReLU(),
            nn.Linear(64, CLASSES))

    def forward(self, x):                        # x: (batch, WINDOW, 1)
        return self.net(x.transpose(1, 2))


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def fit(self, ds, epochs):
        loader = DataLoader(ds, batch_size=64, shuffle=True,
                            generator=torch.Generator().manual_seed(2))
        for _ in range(epochs):
            for xb, yb in loader:
                self.opt.zero_grad()
                nn.functional.cross_entropy(self.model(xb), yb).backward()
                self.opt.step()

    @torch.no_grad()
    def accuracy(self, ds):
        xb, yb = next(iter(DataLoader(ds, batch_size=len(ds))))
        return (self.model(xb).argmax(1) == yb).float().mean().item()


def train(fixed: bool):
    torch.manual_seed(0)
    parts = build(fixed)
    trainer = Trainer(TemporalCNN())
    trainer.fit(parts["train"], epochs=15)
    reported = trainer.accuracy(parts["test"])
    honest = trainer.accuracy(Windows(*_recordings(60, seed=500)))
    return dict(metric=honest, higher_is_better=True, reported=reported, honest=honest,
                evidence=f"reported test accuracy {reported:.3f}, on new machines {honest:.3f} "
                         f"(gap {reported - honest:+.3f})")
