"""HEALTHY: a segmentation dataset whose random crop uses ONE offset for image and mask.

1x24x24 grey images of one bright ellipse each with a float mask; training ``Dataset`` returns
``(image, mask)`` tuples after a random 16x16 crop whose (i, j) is drawn once and applied to
both; the test ``Dataset`` takes the central 16x16 crop of both. One Normalize (training
statistics) for both splits. DataLoader shuffle=True.
"""
import torch
from torch.utils.data import DataLoader, Dataset

S, C = 24, 16


def _make(n, gen):
    ys = torch.arange(S).float().view(1, S, 1)
    xs = torch.arange(S).float().view(1, 1, S)
    cy = torch.rand(n, 1, 1, generator=gen) * 12 + 6
    cx = torch.rand(n, 1, 1, generator=gen) * 12 + 6
    r = torch.rand(n, 1, 1, generator=gen) * 2 + 2.5
    mask = ((((ys - cy) / r) ** 2 + ((xs - cx) / (r + 1)) ** 2) < 1).float()
    img = mask + 0.35 * torch.randn(n, S, S, generator=gen)
    return img.unsqueeze(1), mask.unsqueeze(1)


class CroppedSeg(Dataset):
    def __init__(self, imgs, masks, mean, std, random_crop):
        self.imgs, self.masks, self.mean, self.std = imgs, masks, mean, std
        self.random_crop = random_crop

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, k):
        if self.random_crop:
            i = int(torch.randint(0, S - C + 1, ()))
            j = int(torch.randint(0, S - C + 1, ()))
        else:
            i = j = (S - C) // 2
        img = self.imgs[k, :, i:i + C, j:j + C]
        mask = self.masks[k, :, i:i + C, j:j + C]
        return (img - self.mean) / self.std, mask


def build(fixed: bool = True):
    gen = torch.Generator().manual_seed(0)
    x, m = _make(700, gen)
    tx, tm = _make(250, gen)
    mean, std = x.mean().item(), x.std().item()
    train = CroppedSeg(x, m, mean, std, random_crop=True)
    return dict(train=DataLoader(train, batch_size=32, shuffle=True,
                                 generator=torch.Generator().manual_seed(1)),
                test=CroppedSeg(tx, tm, mean, std, random_crop=False))
