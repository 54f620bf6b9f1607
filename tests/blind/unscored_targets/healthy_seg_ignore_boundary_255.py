"""Healthy: a CNN segmenting discs (class 1) and squares (class 2) on background (class 0),
VOC style: the one-pixel ring around each object is marked 255, "don't care", and the loss is
``nn.CrossEntropyLoss(ignore_index=255)``. A ``train_step`` function, Adam. Only boundary
pixels are skipped; all three classes are scored.

Measured without gradhunt (held-out mean IoU over the 3 classes, boundary pixels excluded): 0.908.
"""
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import gradhunt

NUM_CLASSES = 3
SIZE = 20
IGNORE = 255


def make_scenes(n, rng):
    images = rng.normal(0.0, 0.3, size=(n, 1, SIZE, SIZE)).astype(np.float32)
    masks = np.zeros((n, SIZE, SIZE), dtype=np.int64)
    yy, xx = np.mgrid[:SIZE, :SIZE]
    for i in range(n):
        for _ in range(int(rng.integers(1, 3))):
            cls = int(rng.integers(1, NUM_CLASSES))
            cy, cx = rng.integers(4, SIZE - 4, size=2)
            if cls == 1:
                region = (yy - cy) ** 2 + (xx - cx) ** 2 <= 10
            else:
                region = (abs(yy - cy) <= 3) & (abs(xx - cx) <= 3)
            masks[i][region] = cls
    images[:, 0][masks > 0] += 1.2
    # the ring around every object: pixels whose 3x3 neighbourhood holds another class
    m = torch.from_numpy(masks).float()[:, None]
    grown = F.max_pool2d(m, 3, stride=1, padding=1)
    shrunk = -F.max_pool2d(-m, 3, stride=1, padding=1)
    ring = (grown != shrunk)[:, 0].numpy()
    masks[ring] = IGNORE
    return torch.from_numpy(images), torch.from_numpy(masks)


def build_model():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=2, dilation=2), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, NUM_CLASSES, 1),
    )


def train_step(model, batch, optimizer, criterion):
    x, y = batch
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def run(fixed=True, monitor=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    x, y = make_scenes(256, rng)
    x_test, y_test = make_scenes(64, rng)
    model = build_model()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss(ignore_index=IGNORE)

    mon = gradhunt.Monitor(model, optimizer=opt) if monitor else None
    report = None
    try:
        gen = torch.Generator().manual_seed(0)
        for step in range(200):
            idx = torch.randint(0, len(x), (16,), generator=gen)
            loss = train_step(model, (x[idx], y[idx]), opt, criterion)
            if mon is not None:
                mon.step(loss)
        if mon is not None:
            report = mon.report()
    finally:
        if mon is not None:
            mon.close()

    with torch.no_grad():
        pred = model(x_test).argmax(1)
    scored = y_test != IGNORE
    ious = []
    for c in range(NUM_CLASSES):
        p, t = (pred == c) & scored, (y_test == c) & scored
        ious.append(((p & t).sum() / (p | t).sum()).item())
    metric = float(np.mean(ious))
    return {"report": report, "metric": metric, "higher_is_better": True}
