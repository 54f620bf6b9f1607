"""HEALTHY: a 1-d CNN over 3-axis accelerometer windows whose model ends in
``nn.LogSoftmax(dim=1)``, trained with a class-weighted ``nn.NLLLoss``: log-probabilities where
NLLLoss expects them (every output row is <= 0 and its exp sums to 1). Plain loop, SGD with
momentum, batch 48. Must raise no warning or error.

Task: 5 activities, each a sine of its own frequency on its own axis plus noise; classes
unbalanced (hence the weights). Measured (held-out accuracy, without gradhunt): see the folder
docstring.
"""
import math

import torch
from torch import nn

CLASSES = 5
LENGTH = 64
STEPS = 150
BATCH = 48


def make_data(n, gen):
    y = torch.multinomial(torch.tensor([0.35, 0.25, 0.2, 0.12, 0.08]), n, replacement=True,
                          generator=gen)
    t = torch.arange(LENGTH, dtype=torch.float32)
    phase = 2 * math.pi * torch.rand(n, 1, generator=gen)
    wave = torch.sin(2 * math.pi * (2 + 2 * y[:, None]) * t / LENGTH + phase)
    x = 0.8 * torch.randn(n, 3, LENGTH, generator=gen)
    x[torch.arange(n), y % 3] += wave
    return x, y


def run(*, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(13)
    x_train, y_train = make_data(1500, gen)
    x_test, y_test = make_data(500, gen)
    counts = torch.bincount(y_train, minlength=CLASSES).float()

    model = nn.Sequential(nn.Conv1d(3, 16, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
                          nn.Conv1d(16, 32, 5, padding=2), nn.ReLU(),
                          nn.AdaptiveMaxPool1d(1), nn.Flatten(),
                          nn.Linear(32, CLASSES), nn.LogSoftmax(dim=1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.NLLLoss(weight=counts.sum() / (CLASSES * counts))

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer)

    batches = torch.Generator().manual_seed(14)
    for _ in range(STEPS):
        idx = torch.randint(0, len(x_train), (BATCH,), generator=batches)
        optimizer.zero_grad()
        loss = criterion(model(x_train[idx]), y_train[idx])
        loss.backward()
        optimizer.step()
        if mon is not None:
            mon.step(loss)

    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
