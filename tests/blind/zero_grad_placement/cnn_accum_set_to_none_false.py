"""CNN on small synthetic images, DataLoader with epochs, SGD + momentum, 8 micro-batches of 4.

The program wants an effective batch of 32 on a memory budget of 4 images, so it accumulates
gradients over ``ACCUM = 8`` micro-batches, divides each micro-batch loss by 8 and steps the
optimizer every 8th micro-batch. The buggy loop clears the gradients with
``optimizer.zero_grad(set_to_none=False)`` at the top of every micro-batch, so when
``optimizer.step()`` runs, ``.grad`` holds only the last micro-batch's loss/8: each step applies a
gradient of 4 images at 1/8 of the intended size, and the other 7 backward passes are wasted. The
fixed twin clears once per window, right after ``optimizer.step()``.

Measured (held-out accuracy, higher is better): buggy 0.170, fixed 0.666 (chance 0.167), after
64 optimizer steps.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "ACCUMULATION_DISCARDED"

EPOCHS = 2
MICRO_BATCH = 4
ACCUM = 8              # effective batch 32
N_TRAIN = 1024         # 256 micro-batches -> 32 optimizer steps per epoch, 64 in all
N_TEST = 512
CLASSES = 6
NOISE = 2.0


def make_data(n, templates, gen):
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    x = templates[y] + NOISE * torch.randn(n, 1, 12, 12, generator=gen)
    return x, y


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(16 * 3 * 3, CLASSES)

    def forward(self, x):
        return self.classifier(self.body(x).flatten(1))


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(11)
    templates = torch.randn(CLASSES, 1, 12, 12, generator=gen)
    x_train, y_train = make_data(N_TRAIN, templates, gen)
    x_test, y_test = make_data(N_TEST, templates, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=MICRO_BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(12))

    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    optimizer.zero_grad(set_to_none=False)
    for epoch in range(EPOCHS):
        model.train()
        for i, (images, labels) in enumerate(loader):
            if not fixed:
                optimizer.zero_grad(set_to_none=False)   # bug: clears every micro-batch
            loss = criterion(model(images), labels) / ACCUM
            loss.backward()
            if (i + 1) % ACCUM == 0:
                optimizer.step()
                if fixed:
                    optimizer.zero_grad(set_to_none=False)   # fix: once per window
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
