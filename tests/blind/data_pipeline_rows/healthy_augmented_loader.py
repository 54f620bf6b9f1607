"""HEALTHY: a CNN-style image pipeline done right. A ``Dataset`` subclass over 3x12x12 source
images applies a random augmentation in ``__getitem__`` (random shift of up to one pixel,
random horizontal flip, brightness jitter, pixel noise) with its own seeded generator, so every
pass yields every source image exactly once, each time as a new augmented view; a DataLoader
with ``shuffle=True, drop_last=False``. The test set is built from other source images (drawn
separately) and is not augmented.
"""
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

N_TRAIN = 600
N_TEST = 200
CLASSES = 3


def _images(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % CLASSES
    img = torch.randn(n, 3, 12, 12, generator=g)
    img[torch.arange(n), y] += 0.6
    return img - 0.2, y


class AugmentedImages(Dataset):
    def __init__(self, images, labels, seed=0):
        self.images, self.labels = images, labels
        self.g = torch.Generator().manual_seed(seed)

    def __len__(self):
        return len(self.images)

    def transform(self, img):
        dx, dy = [int(v) for v in torch.randint(-1, 2, (2,), generator=self.g)]
        img = torch.roll(img, shifts=(dy, dx), dims=(1, 2))
        if torch.rand(1, generator=self.g) < 0.5:
            img = torch.flip(img, dims=[2])
        img = img * (1 + 0.1 * torch.randn(1, generator=self.g))
        return img + 0.1 * torch.randn(img.shape, generator=self.g)

    def __getitem__(self, idx):
        return self.transform(self.images[idx]), self.labels[idx]


def build(fixed: bool = True):
    tx, ty = _images(N_TRAIN, seed=0)
    vx, vy = _images(N_TEST, seed=1)
    loader = DataLoader(AugmentedImages(tx, ty), batch_size=32, shuffle=True, drop_last=False,
                        generator=torch.Generator().manual_seed(2))
    return dict(train=loader, test=TensorDataset(vx, vy))
