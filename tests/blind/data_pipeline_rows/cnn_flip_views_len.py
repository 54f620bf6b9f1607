"""CNN on 1x16x16 stripe images; a Dataset subclass that serves each image twice (as is and
horizontally flipped) with ``__getitem__(idx)`` reading image ``idx // 2``; DataLoader epochs
with shuffle=True, Adam.

Bug: ``__len__`` returns ``len(self.images)`` (the number of source images) instead of
``2 * len(self.images)`` (the number of views), so the sampler only draws indices
``0 .. n-1``, which map to images ``0 .. n/2-1``. The images were loaded folder by folder (class
by class), so one pass yields only the first half of the source images: classes 0 and 1, never
2 and 3. Fix: ``return 2 * len(self.images)``.

Measured (held-out accuracy on fresh images of all four classes): buggy 0.500, fixed 1.000.
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

EXPECTED = "PIPELINE_ROWS_MISSING"
N_PER_CLASS = 100
CLASSES = 4


def _stripes(n_per_class, seed):
    """Horizontal stripes (constant along a row); class = frequency. Flip-invariant labels."""
    g = torch.Generator().manual_seed(seed)
    rows = torch.arange(16, dtype=torch.float32)
    images, labels = [], []
    for c in range(CLASSES):                      # "one folder per class", loaded in order
        freq = 1.0 + c
        phase = torch.rand(n_per_class, 1, generator=g) * 6.283
        wave = torch.cos(freq * rows[None, :] * 6.283 / 16 + phase)          # (n, 16)
        img = wave[:, None, :, None].expand(n_per_class, 1, 16, 16).clone()
        img += 0.5 * torch.randn(img.shape, generator=g)
        images.append(img)
        labels.append(torch.full((n_per_class,), c, dtype=torch.long))
    return torch.cat(images), torch.cat(labels)


class FlipViews(Dataset):
    """Each image twice: even index = the image, odd index = its horizontal flip."""

    def __init__(self, images, labels, fixed):
        self.images, self.labels, self.fixed = images, labels, fixed

    def __len__(self):
        if self.fixed:
            return 2 * len(self.images)
        return len(self.images)                   # BUG: number of images, not of views

    def __getitem__(self, idx):
        img = self.images[idx // 2]
        if idx % 2 == 1:
            img = torch.flip(img, dims=[-1])
        return img, self.labels[idx // 2]


def build(fixed: bool):
    x, y = _stripes(N_PER_CLASS, seed=0)
    train_ds = FlipViews(x, y, fixed)
    loader = DataLoader(train_ds, batch_size=32, shuffle=True, drop_last=False,
                        generator=torch.Generator().manual_seed(1))
    return dict(train=loader, test=None)


def train(fixed: bool):
    torch.manual_seed(0)
    loader = build(fixed)["train"]
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d((4, 1)),
        nn.Flatten(), nn.Linear(64, CLASSES))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _epoch in range(4):
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    hx, hy = _stripes(50, seed=99)
    with torch.no_grad():
        acc = (model(hx).argmax(1) == hy).float().mean().item()
    seen = sorted({int(c) for _, yb in loader for c in yb})
    return dict(metric=acc, higher_is_better=True,
                evidence=f"held-out accuracy {acc:.3f}; classes seen in one pass {seen}; "
                         f"{len(loader.dataset)} items per pass")
