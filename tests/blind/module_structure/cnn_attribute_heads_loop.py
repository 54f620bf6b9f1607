"""Multi-label CNN on synthetic 12x12 images, one binary head per attribute appended in a loop.

Each image may contain any of five small 3x3 motifs at a random place; the model says, for each
motif, whether it is present. A shared convolutional trunk feeds one small head per attribute.
The heads are built by a loop that appends an instance created once, before the loop::

    head = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 1))
    for _ in ATTRIBUTES:
        self.heads.append(head)

so the five attributes are scored by ONE head and all get the same answer. The fixed twin
creates the head inside the loop. Trained by a small ``Trainer`` class, SGD with momentum,
batch 64.

Measured (mean held-out per-attribute accuracy, higher is better; about half of the labels are
positive): buggy 0.663, fixed 0.966.
"""
import torch
from torch import nn

EXPECTED = "MODULE_REUSED"

ATTRIBUTES = ("stripe", "cross", "corner", "dot", "ring")
SIZE = 12
N_TRAIN = 2048
N_TEST = 1024
EPOCHS = 4
BATCH = 64


def make_data(n, motifs, gen):
    labels = (torch.rand(n, len(ATTRIBUTES), generator=gen) < 0.5).float()
    images = 0.3 * torch.randn(n, 1, SIZE, SIZE, generator=gen)
    rows = torch.randint(0, SIZE - 2, (n, len(ATTRIBUTES)), generator=gen)
    cols = torch.randint(0, SIZE - 2, (n, len(ATTRIBUTES)), generator=gen)
    for a in range(len(ATTRIBUTES)):
        for r in range(SIZE - 2):
            for c in range(SIZE - 2):
                here = (labels[:, a] > 0) & (rows[:, a] == r) & (cols[:, a] == c)
                images[here, 0, r:r + 3, c:c + 3] += motifs[a]
    return images, labels


class AttributeNet(nn.Module):
    def __init__(self, *, fixed):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.AdaptiveMaxPool2d(1), nn.Flatten(),
        )
        self.heads = nn.ModuleList()
        if fixed:
            for _ in ATTRIBUTES:
                self.heads.append(nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 1)))
        else:
            head = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 1))
            for _ in ATTRIBUTES:
                self.heads.append(head)       # bug: the same instance, five times

    def forward(self, x):
        features = self.trunk(x)
        return torch.cat([head(features) for head in self.heads], dim=1)


class Trainer:
    def __init__(self, model, *, lr, monitor):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.loss_fn = nn.BCEWithLogitsLoss()
        self.monitor = None
        if monitor:
            from gradhunt import Monitor
            self.monitor = Monitor(model, optimizer=self.optimizer)

    def fit(self, images, labels, *, epochs, batch_size, seed):
        gen = torch.Generator().manual_seed(seed)
        for _ in range(epochs):
            self.model.train()
            order = torch.randperm(len(images), generator=gen)
            for start in range(0, len(images), batch_size):
                idx = order[start:start + batch_size]
                self.optimizer.zero_grad()
                loss = self.loss_fn(self.model(images[idx]), labels[idx])
                loss.backward()
                self.optimizer.step()
                if self.monitor is not None:
                    self.monitor.step(loss)

    @torch.no_grad()
    def evaluate(self, images, labels):
        self.model.eval()
        predictions = (self.model(images) > 0).float()
        return (predictions == labels).float().mean().item()

    def finish(self):
        if self.monitor is None:
            return None
        report = self.monitor.report()
        self.monitor.close()
        return report


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    motifs = torch.randn(len(ATTRIBUTES), 3, 3, generator=gen) * 1.5
    x_train, y_train = make_data(N_TRAIN, motifs, gen)
    x_test, y_test = make_data(N_TEST, motifs, gen)

    trainer = Trainer(AttributeNet(fixed=fixed), lr=0.05, monitor=monitor)
    try:
        trainer.fit(x_train, y_train, epochs=EPOCHS, batch_size=BATCH, seed=2)
        accuracy = trainer.evaluate(x_test, y_test)
    finally:
        report = trainer.finish()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
