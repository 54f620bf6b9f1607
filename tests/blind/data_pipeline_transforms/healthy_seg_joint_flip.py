"""HEALTHY: a segmentation pipeline whose random flip moves image and mask together.

Model family: small fully-convolutional segmenter (2 input channels, 3 conv layers) on 2x16x16
images of one rectangle each, binary masks, Adam. Idiom: dict samples ``{"image", "mask"}``;
the augmentation ``JointRandomFlip`` concatenates image and mask along the channel axis and flips
the stacked tensor once (horizontal and vertical, each with p=0.5), then splits it again, so the
two can never disagree. One ``Normalize`` object (per-channel mean/std of the training images)
is used by both splits; the test split is not augmented. Nothing is wrong: gradhunt must stay
quiet. ``build(fixed=...)`` / ``train(fixed=...)`` have the pairs' signature; both values give
the same healthy pipeline.

Measured: held-out foreground IoU 0.86.
"""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

EXPECTED = None
S = 16


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean.view(-1, 1, 1), std.view(-1, 1, 1)

    def __call__(self, img):
        return (img - self.mean) / self.std


class JointRandomFlip:
    def __call__(self, image, mask):
        both = torch.cat([image, mask], dim=0)
        dims = [d for d, p in ((-1, torch.rand(())), (-2, torch.rand(()))) if p < 0.5]
        if dims:
            both = torch.flip(both, dims=dims)
        return both[:image.shape[0]], both[image.shape[0]:]


class RectSegmentation(Dataset):
    def __init__(self, images, masks, normalize, augment=None):
        self.images, self.masks, self.normalize, self.augment = images, masks, normalize, augment

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image, mask = self.normalize(self.images[i]), self.masks[i]
        if self.augment is not None:
            image, mask = self.augment(image, mask)
        return {"image": image, "mask": mask}


def _make(n, gen):
    idx = torch.arange(S)
    top, left = torch.randint(0, S - 5, (2, n, 1, 1), generator=gen)
    h, w = torch.randint(3, 6, (2, n, 1, 1), generator=gen)
    rows = (idx.view(1, S, 1) >= top) & (idx.view(1, S, 1) < top + h)
    cols = (idx.view(1, 1, S) >= left) & (idx.view(1, 1, S) < left + w)
    mask = (rows & cols).float().unsqueeze(1)
    img = torch.cat([0.8 * mask, -0.6 * mask], dim=1) + 0.4 * torch.randn(n, 2, S, S,
                                                                         generator=gen)
    return img + torch.tensor([0.3, -0.2]).view(1, 2, 1, 1), mask


def build(fixed: bool = True):
    gen = torch.Generator().manual_seed(0)
    x_train, m_train = _make(800, gen)
    x_test, m_test = _make(300, gen)
    normalize = Normalize(x_train.mean((0, 2, 3)), x_train.std((0, 2, 3)))
    train = RectSegmentation(x_train, m_train, normalize, augment=JointRandomFlip())
    test = RectSegmentation(x_test, m_test, normalize)
    return dict(train=train, test=test)


def train(fixed: bool = True):
    torch.manual_seed(0)
    data = build(fixed)
    loader = DataLoader(data["train"], batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(1))
    model = nn.Sequential(nn.Conv2d(2, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 1, 3, padding=1))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for _epoch in range(5):
        for batch in loader:
            loss = F.binary_cross_entropy_with_logits(model(batch["image"]), batch["mask"])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        batch = next(iter(DataLoader(data["test"], batch_size=len(data["test"]))))
        pred = (model(batch["image"]) > 0).float()
        iou = ((pred * batch["mask"]).sum() / ((pred + batch["mask"]) > 0).sum()).item()
    return dict(metric=iou, higher_is_better=True, evidence=f"held-out foreground IoU {iou:.3f}")
