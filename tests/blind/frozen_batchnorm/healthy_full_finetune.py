"""HEALTHY control: a pretrained CNN with BatchNorm2d fine-tuned end to end (nothing frozen).

A small CNN (conv-BN-ReLU blocks + head) is trained on images from an old camera, then its head
is replaced and the whole network, every parameter trainable, is fine-tuned on a new camera
(brighter, higher contrast) with a DataLoader, SGD + momentum and ``model.train()`` each epoch.
Its BatchNorm layers update their running statistics from the new camera's batches, as they
should: their parameters are trained too, and the statistics follow them. Nothing to report.

Measured: held-out accuracy on the new camera, eval mode, 0.978; the Monitor reports no findings.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = None

CLASSES = 5
EPOCHS = 6


def images(n, templates, gen, *, gain=1.0, offset=0.0):
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    x = templates[y] + 0.9 * torch.randn(n, 1, 10, 10, generator=gen)
    return x * gain + offset, y


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 12, 3, padding=1, bias=False), nn.BatchNorm2d(12), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(12, 24, 3, padding=1, bias=False), nn.BatchNorm2d(24), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(24, CLASSES))


def run(*, fixed: bool = True, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(11)
    old_templates = torch.randn(CLASSES, 1, 10, 10, generator=gen)
    new_templates = torch.randn(CLASSES, 1, 10, 10, generator=gen)
    x_old, y_old = images(1200, old_templates, gen)
    x_new, y_new = images(480, new_templates, gen, gain=2.5, offset=1.5)
    x_test, y_test = images(500, new_templates, gen, gain=2.5, offset=1.5)
    loss_fn = nn.CrossEntropyLoss()

    model = make_model()       # "pretraining" (no gradhunt)
    pre_opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for step in range(150):
        idx = torch.randint(0, len(x_old), (64,), generator=gen)
        pre_opt.zero_grad()
        loss_fn(model(x_old[idx]), y_old[idx]).backward()
        pre_opt.step()

    model[-1] = nn.Linear(24, CLASSES)      # new head, the whole network fine-tuned
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    loader = DataLoader(TensorDataset(x_new, y_new), batch_size=16, shuffle=True,
                        generator=torch.Generator().manual_seed(12))
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
            if mon is not None:
                mon.step(loss)

    model.eval()
    with torch.no_grad():
        acc = (model(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": acc, "higher_is_better": True}
