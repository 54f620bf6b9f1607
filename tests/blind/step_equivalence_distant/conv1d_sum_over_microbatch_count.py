"""1D CNN signal classifier; a summed cross-entropy per micro-batch divided by the number of
micro-batches instead of the number of rows, with unequal micro-batches (30 rows in
micro-batches of 8: 8, 8, 8, 6).

Model family: 1D CNN (Conv1d, GroupNorm, ReLU, global average pooling) on 3-channel
synthetic waveforms (which of 4 frequencies dominates).
Idiom: a plain ``train_step`` function over a ``micro_batches`` generator of index slices;
plain SGD.
The bug: ``F.cross_entropy(logits, yb, reduction="sum") / n_micro`` (n_micro = 4): every row
weighs 1/4 instead of 1/30, so the step's gradient is 7.5 times the objective's.
The fix: ``/ n_rows``.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = ("STEP_NOT_OBJECTIVE", "scaled by")
N, MB, L, C = 30, 8, 64, 4
SCALE = N / math.ceil(N / MB)     # 7.5


class SignalCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(3, 16, 5, padding=2), nn.GroupNorm(4, 16), nn.ReLU(),
            nn.Conv1d(16, 32, 5, padding=2, stride=2), nn.GroupNorm(4, 32), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, C))

    def forward(self, x):
        return self.net(x)


def make_batch(gen, n=N):
    y = torch.randint(0, C, (n,), generator=gen)
    t = torch.linspace(0, 1, L)
    freq = (y.float() + 1.0) * 3.0
    phase = torch.rand(n, 3, 1, generator=gen) * 6.28
    x = torch.sin(6.28 * freq[:, None, None] * t + phase) + 0.3 * torch.randn(n, 3, L,
                                                                              generator=gen)
    return x, y


def micro_batches(x, y, size):
    for s in range(0, x.shape[0], size):
        yield x[s:s + size], y[s:s + size]


def make_train_step(fixed):
    def train_step(model, batch, optimizer):
        x, y = batch
        n_rows = x.shape[0]
        n_micro = math.ceil(n_rows / MB)
        optimizer.zero_grad()
        total = 0.0
        for xb, yb in micro_batches(x, y, MB):
            loss = F.cross_entropy(model(xb), yb, reduction="sum")
            loss = loss / (n_rows if fixed else n_micro)
            loss.backward()
            total += loss.item()
        optimizer.step()
        return total
    return train_step


def effective_loss(model, x, y):
    return F.cross_entropy(model(x), y, reduction="sum") / math.ceil(x.shape[0] / MB)


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = SignalCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = make_batch(torch.Generator().manual_seed(4))
    return {"model": model, "loss_fn": nn.CrossEntropyLoss(), "inputs": x, "targets": y,
            "train_step": make_train_step(fixed), "optimizer": optimizer}
