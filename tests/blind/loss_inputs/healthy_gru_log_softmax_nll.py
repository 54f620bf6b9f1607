"""HEALTHY: a GRU sequence classifier whose model ends in ``nn.LogSoftmax(dim=1)``, trained with
``nn.NLLLoss``: log-probabilities where NLLLoss expects log-probabilities (the pytorch/examples
pairing, equivalent to logits into CrossEntropyLoss). Not PROBABILITIES_AS_LOGITS: every output
row is <= 0 and its exp sums to 1. Plain loop, Adam, batch 32. Must raise no warning or error.

Task: sequences of 12 noisy 4-d vectors; the class (one of 5) is set by the direction the
sequence drifts in. Measured (held-out accuracy, without gradhunt): 1.000.
"""
import torch
from torch import nn

CLASSES = 5
LENGTH = 12
STEPS = 200
BATCH = 32


def make_data(n, directions, gen):
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    t = torch.arange(LENGTH, dtype=torch.float32)[None, :, None] / LENGTH
    x = directions[y][:, None, :] * t + 0.5 * torch.randn(n, LENGTH, 4, generator=gen)
    return x, y


class GRUClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 32, batch_first=True)
        self.head = nn.Sequential(nn.Linear(32, CLASSES), nn.LogSoftmax(dim=1))

    def forward(self, x):
        _, last = self.gru(x)
        return self.head(last[-1])


def run(*, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    directions = 2.0 * torch.randn(CLASSES, 4, generator=gen)
    x_train, y_train = make_data(2048, directions, gen)
    x_test, y_test = make_data(512, directions, gen)

    model = GRUClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.NLLLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    batches = torch.Generator().manual_seed(2)
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
