"""A small U-Net (two levels, a skip connection) with a 5-class head segmenting four kinds of
blobs, trained with Adam over a ``DataLoader`` for a few epochs.

Bug: the Dataset "cleans" the masks with ``(mask > 0).long()``, a line from a binary
foreground/background tutorial, so every element of every target is 0 or 1 while the head has
5 classes. Classes 2-4 never occur in a target: the net learns foreground vs background and
labels every object as class 1. Fixed: the mask's class ids as they are.

Measured without gradhunt (held-out mean IoU over the 5 classes): buggy 0.242, fixed 0.744.
"""
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

import gradhunt

EXPECTED = "LABEL_RANGE"
NUM_CLASSES = 5
SIZE = 20


def make_scenes(n, rng):
    """Discs, squares, horizontal and vertical bars (classes 1-4) on a noisy background."""
    images = rng.normal(0.0, 0.25, size=(n, 1, SIZE, SIZE)).astype(np.float32)
    masks = np.zeros((n, SIZE, SIZE), dtype=np.int64)
    yy, xx = np.mgrid[:SIZE, :SIZE]
    for i in range(n):
        for _ in range(int(rng.integers(2, 4))):
            cls = int(rng.integers(1, NUM_CLASSES))
            cy, cx = rng.integers(4, SIZE - 4, size=2)
            if cls == 1:
                region = (yy - cy) ** 2 + (xx - cx) ** 2 <= 9
            elif cls == 2:
                region = (abs(yy - cy) <= 3) & (abs(xx - cx) <= 3)
            elif cls == 3:
                region = (abs(yy - cy) <= 1) & (abs(xx - cx) <= 4)
            else:
                region = (abs(yy - cy) <= 4) & (abs(xx - cx) <= 1)
            masks[i][region] = cls
    images[:, 0][masks > 0] += 1.0
    return images, masks


class Scenes(Dataset):
    def __init__(self, images, masks, binarise):
        self.images, self.masks, self.binarise = images, masks, binarise

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        mask = torch.from_numpy(self.masks[i])
        if self.binarise:
            mask = (mask > 0).long()
        return torch.from_numpy(self.images[i]), mask


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class TinyUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = block(1, 8)
        self.bottom = block(8, 16)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.fuse = block(16, 16)
        self.out = nn.Conv2d(16, NUM_CLASSES, 1)

    def forward(self, x):
        skip = self.down(x)
        deep = self.bottom(F.max_pool2d(skip, 2))
        return self.out(self.fuse(torch.cat([self.up(deep), skip], dim=1)))


def mean_iou(pred, target):
    ious = []
    for c in range(NUM_CLASSES):
        inter = ((pred == c) & (target == c)).sum().item()
        union = ((pred == c) | (target == c)).sum().item()
        ious.append(inter / union if union else 1.0)
    return float(np.mean(ious))


def run(fixed=False, monitor=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    images, masks = make_scenes(320, rng)
    test_images, test_masks = make_scenes(64, rng)
    loader = DataLoader(Scenes(images, masks, binarise=not fixed), batch_size=16, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    model = TinyUNet()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss()

    mon = gradhunt.Monitor(model, optimizer=opt) if monitor else None
    report = None
    try:
        for epoch in range(8):
            model.train()
            for x, y in loader:
                opt.zero_grad()
                loss = criterion(model(x), y)
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
        pred = model(torch.from_numpy(test_images)).argmax(1)
    metric = mean_iou(pred, torch.from_numpy(test_masks))
    return {"report": report, "metric": metric, "higher_is_better": True}
