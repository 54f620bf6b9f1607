"""TRANSFORM_SHIFT: different normalisation constants per split, applied in the DataLoaders' collate_fn.

Model family: 1-D CNN activity classifier (Conv1d x2 over 3-axis accelerometer windows of 64
steps, global average pool, linear head), Adam, plain epoch loop. Idiom: the Dataset returns raw
windows in m/s^2; normalisation happens per batch in a ``collate_fn`` built by
``make_collate(mean, std)``. The training loader gets the constants measured on the training
windows; the evaluation loader was built with ``IMU_MEAN_LEGACY``/``IMU_STD_LEGACY``, constants
copied from another recording campaign (std about 2.5x larger on the x/y axes, gravity offset on
z off by 0.6), so every test window is squeezed towards zero and shifted. Both splits are handed
over as DataLoaders (batch_size 32 and 128); the Dataset items themselves are identical in
distribution, only the collated batches differ. The fixed twin passes the training constants to
both loaders.

Measured (held-out accuracy through the test loader, higher is better): 0.46 (buggy) vs 0.995 (fixed).
"""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

EXPECTED = "TRANSFORM_SHIFT"
T = 64
IMU_MEAN_LEGACY = torch.tensor([0.0, 0.0, 9.2])
IMU_STD_LEGACY = torch.tensor([3.0, 3.0, 2.5])


class ImuWindows(Dataset):
    def __init__(self, windows, labels):
        self.windows, self.labels = windows, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.windows[i], self.labels[i]


def make_collate(mean, std):
    mean, std = mean.view(1, 3, 1), std.view(1, 3, 1)

    def collate(samples):
        x = torch.stack([s[0] for s in samples])
        y = torch.stack([s[1] for s in samples])
        return (x - mean) / std, y
    return collate


def _record(n, gen):
    """still / walking / running / cycling: amplitude and cadence of the 3 axes differ."""
    labels = torch.randperm(n, generator=gen) % 4
    amp = torch.tensor([[0.3, 0.3, 0.2], [1.3, 0.9, 1.1], [2.6, 1.8, 2.4], [1.0, 2.0, 0.6]])
    cadence = torch.tensor([0.05, 0.12, 0.20, 0.09])
    t = torch.arange(T, dtype=torch.float32)
    phase = torch.rand(n, 3, 1, generator=gen) * 6.28
    f = cadence[labels].view(n, 1, 1) * (1 + 0.15 * torch.randn(n, 1, 1, generator=gen))
    a = amp[labels].view(n, 3, 1) * (1 + 0.2 * torch.randn(n, 1, 1, generator=gen))
    x = a * torch.sin(6.2832 * f * t + phase) + 0.3 * torch.randn(n, 3, T, generator=gen)
    x[:, 2] += 9.81
    return x, labels


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    x_train, y_train = _record(1000, gen)
    x_test, y_test = _record(400, gen)
    mean = x_train.mean((0, 2))
    std = x_train.std((0, 2))
    train = DataLoader(ImuWindows(x_train, y_train), batch_size=32, shuffle=True,
                       collate_fn=make_collate(mean, std),
                       generator=torch.Generator().manual_seed(1))
    if fixed:
        test_collate = make_collate(mean, std)
    else:
        test_collate = make_collate(IMU_MEAN_LEGACY, IMU_STD_LEGACY)   # BUG: other constants
    test = DataLoader(ImuWindows(x_test, y_test), batch_size=128, collate_fn=test_collate)
    return dict(train=train, test=test)


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = nn.Sequential(nn.Conv1d(3, 16, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
                          nn.Conv1d(16, 32, 5, padding=2), nn.ReLU(),
                          nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _epoch in range(6):
        for x, y in data["train"]:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in data["test"]:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    acc = correct / total
    return dict(metric=acc, higher_is_better=True,
                evidence=f"held-out accuracy through the test loader {acc:.3f}")
