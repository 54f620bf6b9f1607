"""TRANSFORM_ONE_SIDED: a random horizontal flip of the image, not of its segmentation mask.

Model family: small fully-convolutional segmenter (3 conv layers, per-pixel logit) on 1x16x20
grey images of one bright blob each, binary masks, Adam, plain epoch loop over a DataLoader.
Idiom: a ``Dataset`` subclass returning dict samples ``{"image": ..., "mask": ...}``, with an
augmentation class ``RandomHFlip`` whose ``__call__`` takes the sample dict; it flips
``sample["image"]`` with ``torch.flip(..., dims=[-1])`` and returns the dict with the mask
untouched, so half the time the mask sits at the mirror image of the object. The fixed twin
flips both entries with the same draw. Both splits share one Normalize (training statistics);
the test split has no augmentation.

Measured (held-out IoU of the foreground on clean images, higher is better): 0.70 (buggy) vs 0.90 (fixed).
"""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

EXPECTED = "TRANSFORM_ONE_SIDED"
H, W = 16, 20


class RandomHFlip:
    def __init__(self, p=0.5, with_mask=True):
        self.p, self.with_mask = p, with_mask

    def __call__(self, sample):
        if torch.rand(()) < self.p:
            sample = dict(sample)
            sample["image"] = torch.flip(sample["image"], dims=[-1])
            if self.with_mask:
                sample["mask"] = torch.flip(sample["mask"], dims=[-1])
        return sample


class BlobSegmentation(Dataset):
    def __init__(self, images, masks, mean, std, augment=None):
        self.images, self.masks = images, masks
        self.mean, self.std, self.augment = mean, std, augment

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        sample = {"image": (self.images[i] - self.mean) / self.std, "mask": self.masks[i]}
        if self.augment is not None:
            sample = self.augment(sample)
        return sample


def _make(n, gen):
    ys = torch.arange(H, dtype=torch.float32).view(1, H, 1)
    xs = torch.arange(W, dtype=torch.float32).view(1, 1, W)
    cy = torch.rand(n, 1, 1, generator=gen) * (H - 6) + 3
    cx = torch.rand(n, 1, 1, generator=gen) * (W - 6) + 3
    ry = torch.rand(n, 1, 1, generator=gen) * 2 + 1.5
    rx = torch.rand(n, 1, 1, generator=gen) * 2 + 1.5
    mask = ((((ys - cy) / ry) ** 2 + ((xs - cx) / rx) ** 2) < 1).float()
    img = 0.9 * mask + 0.35 * torch.randn(n, H, W, generator=gen)
    return img.unsqueeze(1), mask.unsqueeze(1)


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    x_train, m_train = _make(800, gen)
    x_test, m_test = _make(300, gen)
    mean, std = x_train.mean().item(), x_train.std().item()
    flip = RandomHFlip(0.5) if fixed else RandomHFlip(0.5, with_mask=False)   # BUG: image only
    train = BlobSegmentation(x_train, m_train, mean, std, augment=flip)
    test = BlobSegmentation(x_test, m_test, mean, std)
    return dict(train=train, test=test)


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    loader = DataLoader(data["train"], batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(1))
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 1, 3, padding=1))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for _epoch in range(6):
        for batch in loader:
            loss = F.binary_cross_entropy_with_logits(model(batch["image"]), batch["mask"])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    inter = union = 0.0
    with torch.no_grad():
        for batch in DataLoader(data["test"], batch_size=300):
            pred = (model(batch["image"]) > 0).float()
            inter += (pred * batch["mask"]).sum().item()
            union += ((pred + batch["mask"]) > 0).float().sum().item()
    iou = inter / union
    return dict(metric=iou, higher_is_better=True,
                evidence=f"held-out foreground IoU on un-augmented test images {iou:.3f}")
