"""HEALTHY: a test set from the same generator, another seed, plus modest sensor noise.

1x16x16 grey images of 3 blob-count classes (1, 2 or 3 bright blobs at random places, pixel
noise 0.3 in every image). Training: 900 images from seed 0 in a ``TensorDataset`` behind a
shuffled DataLoader; test: 300 images from seed 1 with an extra N(0, 0.05^2) "second camera"
noise. Same distribution, no image shared or derived from a training one: no leakage, no
transform difference worth naming (the extra noise is 0.05 on top of 0.3).
"""
import torch
from torch.utils.data import DataLoader, TensorDataset


def _blobs(n, seed):
    g = torch.Generator().manual_seed(seed)
    ys = torch.arange(16).view(16, 1).float()
    xs = torch.arange(16).view(1, 16).float()
    y = torch.randint(0, 3, (n,), generator=g)
    imgs = 0.3 * torch.randn(n, 1, 16, 16, generator=g)
    for i in range(n):
        for _ in range(int(y[i]) + 1):
            cy, cx = (torch.rand(2, generator=g) * 12 + 2).tolist()
            imgs[i, 0] += torch.exp(-((ys - cy) ** 2 + (xs - cx) ** 2) / 3.0)
    return imgs, y


def build(fixed: bool = True):
    x, y = _blobs(900, seed=0)
    tx, ty = _blobs(300, seed=1)
    tx = tx + 0.05 * torch.randn(tx.shape, generator=torch.Generator().manual_seed(2))
    train = DataLoader(TensorDataset(x, y), batch_size=50, shuffle=True,
                       generator=torch.Generator().manual_seed(3))
    return dict(train=train, test=TensorDataset(tx, ty))
