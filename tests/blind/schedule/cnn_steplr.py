"""CNN on small synthetic images, SGD + momentum, StepLR(step_size=30) stepped per batch.

The schedule is the classic ImageNet one, written in epochs: decay the learning rate 10x every
30 epochs. The buggy loop calls ``scheduler.step()`` inside the batch loop, so the rate drops 10x
every 30 *batches*: 0.05 -> 0.005 at step 30, 5e-4 at step 60, ~0 by step 150, and the remaining
~90% of the run learns nothing. The fixed twin steps the scheduler once per epoch.

Measured (held-out accuracy, higher is better): buggy 0.178 (chance 0.167), fixed 0.625.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "LR_SCHEDULE_TOO_FAST"

EPOCHS = 35
BATCH = 32
N_TRAIN = 640          # 20 batches per epoch -> 700 optimizer steps
N_TEST = 512
CLASSES = 6


def make_data(n, templates, gen):
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    x = templates[y] + 1.3 * torch.randn(n, 1, 10, 10, generator=gen)
    # random shifts of up to 2 pixels: the net has to learn something translation-tolerant
    shifts = torch.randint(-2, 3, (n, 2), generator=gen)
    x = torch.stack([torch.roll(img, (int(a), int(b)), dims=(1, 2)) for img, (a, b) in zip(x, shifts)])
    return x, y


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    templates = torch.randn(CLASSES, 1, 10, 10, generator=gen)
    x_train, y_train = make_data(N_TRAIN, templates, gen)
    x_test, y_test = make_data(N_TEST, templates, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(2))

    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.1)
    loss_fn = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for epoch in range(EPOCHS):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            if not fixed:
                scheduler.step()          # bug: a per-epoch schedule stepped every batch
            if mon is not None:
                mon.step(loss)
        if fixed:
            scheduler.step()              # fix: once per epoch

    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
