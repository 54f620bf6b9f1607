"""HEALTHY: strong train-only augmentation with a clean test transform.

3x20x20 colour images of 4 shape classes. Training ``Dataset``: random resized crop by hand
(scale 0.5-1, aspect 3/4-4/3, ``F.interpolate`` back to 16x16) and colour jitter by hand
(brightness, contrast, saturation factors in [0.7, 1.3]), then one shared Normalize. Test
``Dataset``: the full image resized to 16x16, the same Normalize. DataLoader shuffle=True.
Nothing is wrong: the augmentation is random, on the training side only, and moves the image
and nothing else (the label is a class).
"""
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

MEAN = torch.tensor([0.45, 0.45, 0.45]).view(3, 1, 1)
STD = torch.tensor([0.25, 0.25, 0.25]).view(3, 1, 1)


def _images(n, gen):
    y = torch.randint(0, 4, (n,), generator=gen)
    img = 0.3 + 0.1 * torch.rand(n, 3, 20, 20, generator=gen)
    colour = torch.rand(n, 3, 1, 1, generator=gen)
    for i in range(n):
        c = int(y[i])
        r0, c0 = (int(v) for v in torch.randint(2, 8, (2,), generator=gen))
        if c == 0:
            img[i, :, r0:r0 + 10, c0:c0 + 10] = colour[i]
        elif c == 1:
            img[i, :, r0:r0 + 10, c0 + 4:c0 + 6] = colour[i]
        elif c == 2:
            img[i, :, r0 + 4:r0 + 6, c0:c0 + 10] = colour[i]
        else:
            for k in range(10):
                img[i, :, r0 + k, c0 + k] = colour[i, :, 0, 0]
    return img.clamp(0, 1), y


def _jitter(x):
    b, c, s = (0.7 + 0.6 * torch.rand(3)).tolist()
    x = x * b
    mean = x.mean()
    x = (x - mean) * c + mean
    grey = x.mean(0, keepdim=True)
    return ((x - grey) * s + grey).clamp(0, 1)


def _random_resized_crop(x, out=16):
    area = x.shape[-1] * x.shape[-2] * (0.5 + 0.5 * float(torch.rand(())))
    ratio = float(torch.empty(()).uniform_(0.75, 4 / 3))
    h = min(20, max(4, int(round((area / ratio) ** 0.5))))
    w = min(20, max(4, int(round((area * ratio) ** 0.5))))
    i = int(torch.randint(0, 20 - h + 1, ()))
    j = int(torch.randint(0, 20 - w + 1, ()))
    crop = x[:, i:i + h, j:j + w]
    return F.interpolate(crop[None], size=(out, out), mode="bilinear", align_corners=False)[0]


class ShapeImages(Dataset):
    def __init__(self, imgs, labels, train):
        self.imgs, self.labels, self.train = imgs, labels, train

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = self.imgs[i]
        if self.train:
            x = _jitter(_random_resized_crop(x))
        else:
            x = F.interpolate(x[None], size=(16, 16), mode="bilinear", align_corners=False)[0]
        return (x - MEAN) / STD, self.labels[i]


def build(fixed: bool = True):
    gen = torch.Generator().manual_seed(0)
    train = ShapeImages(*_images(800, gen), train=True)
    test = ShapeImages(*_images(300, gen), train=False)
    return dict(train=DataLoader(train, batch_size=64, shuffle=True,
                                 generator=torch.Generator().manual_seed(1)), test=test)
