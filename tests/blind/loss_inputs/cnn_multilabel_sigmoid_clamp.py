"""Multi-label CNN on synthetic 12x12 images, plain loop, SGD + momentum, BCEWithLogitsLoss.

Each image holds any subset of 5 small patterns (at random positions, with noise); the net tags
which ones are present. The buggy model ends its forward in ``torch.sigmoid(...)`` followed by a
defensive ``.clamp(1e-6, 1 - 1e-6)`` ("so BCE never sees 0 or 1") and still trains with
``nn.BCEWithLogitsLoss``, which applies its own sigmoid: the loss sees values squeezed into
[0, 1], i.e. sigmoid(p) in [0.5, 0.73], and its gradients are small (times sigmoid'(x) <= 1/4)
and barely depend on how wrong the prediction is. Fix: return the raw scores from forward (the
loss applies the sigmoid), and apply ``torch.sigmoid`` only when predicting.

Measured (held-out per-label accuracy, higher is better, without gradhunt): buggy 0.613, fixed 0.898.
"""
import torch
from torch import nn

EXPECTED = "PROBABILITIES_AS_LOGITS"

LABELS = 5
SIZE = 12
STEPS = 220
BATCH = 48


def make_data(n, patterns, gen):
    y = (torch.rand(n, LABELS, generator=gen) < 0.4).float()
    x = 0.6 * torch.randn(n, 1, SIZE, SIZE, generator=gen)
    pos = torch.randint(0, SIZE - 4, (n, LABELS, 2), generator=gen)
    for i in range(n):
        for k in range(LABELS):
            if y[i, k] > 0:
                r, c = int(pos[i, k, 0]), int(pos[i, k, 1])
                x[i, 0, r:r + 4, c:c + 4] += patterns[k]
    return x, y


class TagCNN(nn.Module):
    def __init__(self, *, fixed):
        super().__init__()
        self.fixed = fixed
        self.body = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(1),
        )
        self.classifier = nn.Linear(32, LABELS)

    def forward(self, x):
        scores = self.classifier(self.body(x).flatten(1))
        if self.fixed:
            return scores                                          # fix: raw scores (logits)
        return torch.sigmoid(scores).clamp(1e-6, 1 - 1e-6)         # bug: probabilities

    def predict(self, x):
        out = self(x)
        return (torch.sigmoid(out) if self.fixed else out) > 0.5


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    patterns = 1.5 * torch.randn(LABELS, 4, 4, generator=gen)
    x_train, y_train = make_data(1536, patterns, gen)
    x_test, y_test = make_data(512, patterns, gen)

    model = TagCNN(fixed=fixed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.BCEWithLogitsLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    order = torch.Generator().manual_seed(2)
    for step in range(STEPS):
        idx = torch.randint(0, len(x_train), (BATCH,), generator=order)
        optimizer.zero_grad()
        loss = criterion(model(x_train[idx]), y_train[idx])
        loss.backward()
        optimizer.step()
        if mon is not None:
            mon.step(loss)

    model.eval()
    with torch.no_grad():
        accuracy = (model.predict(x_test) == y_test.bool()).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
