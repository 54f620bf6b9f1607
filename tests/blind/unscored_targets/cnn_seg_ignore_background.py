"""A small CNN segmenting coloured rectangles on a dark background, trained in a plain loop
with SGD + momentum.

Bug: ``nn.CrossEntropyLoss(ignore_index=0)``, copied from a recipe where 0 was the "void"
label; here 0 is the background, a real class and most of the pixels. Background pixels never
reach the loss, so the net never learns to say "background" and paints a foreground class
over it. Fixed: ``nn.CrossEntropyLoss()`` (no label in this data set is void).

Measured without gradhunt (held-out accuracy on background pixels): buggy 0.000, fixed 0.997.
"""
import numpy as np
import torch
from torch import nn

import gradhunt

EXPECTED = "IGNORED_CLASS"
NUM_CLASSES = 4          # 0 background, 1-3 rectangles of three colours
SIZE = 16


def make_data(n, rng):
    images = rng.normal(0.0, 0.3, size=(n, 3, SIZE, SIZE)).astype(np.float32)
    masks = np.zeros((n, SIZE, SIZE), dtype=np.int64)
    for i in range(n):
        for _ in range(rng.integers(1, 4)):
            cls = int(rng.integers(1, NUM_CLASSES))
            h, w = rng.integers(3, 8, size=2)
            top, left = rng.integers(0, SIZE - h), rng.integers(0, SIZE - w)
            masks[i, top:top + h, left:left + w] = cls
    for cls in range(1, NUM_CLASSES):
        images[:, cls - 1][masks == cls] += 1.5
    return torch.from_numpy(images), torch.from_numpy(masks)


def build_model():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, NUM_CLASSES, 1),
    )


def run(fixed=False, monitor=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    x_train, y_train = make_data(256, rng)
    x_test, y_test = make_data(64, rng)
    model = build_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss() if fixed else nn.CrossEntropyLoss(ignore_index=0)

    mon = gradhunt.Monitor(model, optimizer=opt) if monitor else None
    report = None
    try:
        gen = torch.Generator().manual_seed(1)
        for step in range(150):
            idx = torch.randint(0, len(x_train), (16,), generator=gen)
            opt.zero_grad()
            loss = criterion(model(x_train[idx]), y_train[idx])
            loss.backward()
            opt.step()
            if mon is not None:
                mon.step(loss)
        if mon is not None:
            report = mon.report()
    finally:
        if mon is not None:
            mon.close()

    model.eval()
    with torch.no_grad():
        pred = model(x_test).argmax(1)
    background = y_test == 0
    metric = (pred[background] == 0).float().mean().item()
    return {"report": report, "metric": metric, "higher_is_better": True}
