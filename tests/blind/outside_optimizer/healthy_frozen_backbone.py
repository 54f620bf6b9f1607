"""HEALTHY: a frozen pretrained backbone (``requires_grad_(False)``) and an optimizer on the head.

An MLP feature extractor is first trained on a source task (8-way classification of points
from a random 2-layer teacher), then frozen with ``backbone.requires_grad_(False)``; a new
linear head for a 3-way target task that reuses the same features is trained with
``Adam(model.head.parameters())``, the loop clearing with ``optimizer.zero_grad()``. The
backbone is in no optimizer on purpose and gets no gradient: nothing here is a bug.

Measured (held-out accuracy of the target task, chance 0.33): 0.90.
"""
import torch
from torch import nn

EXPECTED = None

FEATURES = 16


def make_points(n, teacher, gen, *, classes):
    x = torch.randn(n, 10, generator=gen)
    with torch.no_grad():
        scores = teacher(x)
    return x, scores.argmax(1) % classes     # the target task merges the source classes


class Probe(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(10, 64), nn.GELU(), nn.Linear(64, FEATURES),
                                      nn.GELU())
        self.head = nn.Linear(FEATURES, classes)

    def forward(self, x):
        return self.head(self.backbone(x))


def run(*, fixed: bool = True, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(17)
    teacher = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 8))

    model = Probe(classes=8)
    x_src, y_src = make_points(4096, teacher, gen, classes=8)
    pre_optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(300):
        idx = torch.randint(0, len(x_src), (128,), generator=gen)
        pre_optimizer.zero_grad()
        nn.functional.cross_entropy(model(x_src[idx]), y_src[idx]).backward()
        pre_optimizer.step()

    model.backbone.requires_grad_(False)          # frozen on purpose
    model.head = nn.Linear(FEATURES, 3)
    optimizer = torch.optim.Adam(model.head.parameters(), lr=1e-2)
    x_train, y_train = make_points(2048, teacher, gen, classes=3)
    x_test, y_test = make_points(1024, teacher, gen, classes=3)
    loss_fn = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)
    model.train()
    for _ in range(200):
        idx = torch.randint(0, len(x_train), (64,), generator=gen)
        optimizer.zero_grad()
        loss = loss_fn(model(x_train[idx]), y_train[idx])
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
