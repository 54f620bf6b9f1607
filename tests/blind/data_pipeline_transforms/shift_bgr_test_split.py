"""TRANSFORM_SHIFT: the test images are in BGR channel order, the training images in RGB.

Model family: small CNN classifier (conv-BN-ReLU x2, global pool, linear) on 3x12x12 colour
images of three fruit classes told apart mostly by colour (red apple, orange, green pear on a
warm background), AdamW, a ``Trainer`` class with ``fit``/``evaluate``. Idiom: the decoded
arrays are kept in a ``TensorDataset`` per split and wrapped by a ``FruitImages`` Dataset that
yields dict samples ``{"image": ..., "label": ...}`` after a per-channel Normalize. The training
arrays were decoded RGB; the test arrays come from an OpenCV-style decoder that returns BGR, and
the wrapper is built with ``bgr_to_rgb=False`` for them (the default), so red and blue are swapped
on the test side only. The fixed twin builds the test wrapper with ``bgr_to_rgb=True``.

Measured (held-out accuracy, higher is better): 0.55 (buggy) vs 1.00 (fixed).
"""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

EXPECTED = "TRANSFORM_SHIFT"
CLASS_RGB = torch.tensor([[0.80, 0.18, 0.20], [0.85, 0.50, 0.12], [0.35, 0.70, 0.22]])
BACKGROUND = torch.tensor([0.55, 0.48, 0.36])
MEAN = torch.tensor([0.58, 0.48, 0.31]).view(3, 1, 1)
STD = torch.tensor([0.17, 0.16, 0.12]).view(3, 1, 1)


def _decode(n, gen, bgr):
    """Synthetic 'decoded photos': a coloured disc of random size and place on a background."""
    labels = torch.randperm(n, generator=gen) % 3
    coords = torch.arange(12, dtype=torch.float32)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    cy, cx = (torch.rand(2, n, 1, 1, generator=gen) * 6 + 3)
    r = torch.rand(n, 1, 1, generator=gen) * 2 + 2.5
    disc = (((yy - cy) ** 2 + (xx - cx) ** 2) < r ** 2).float().unsqueeze(1)      # (n,1,12,12)
    fruit = CLASS_RGB[labels].view(n, 3, 1, 1)
    bg = BACKGROUND.view(1, 3, 1, 1) + 0.08 * torch.randn(n, 3, 1, 1, generator=gen)
    img = disc * fruit + (1 - disc) * bg + 0.07 * torch.randn(n, 3, 12, 12, generator=gen)
    img = img.clamp(0, 1)
    if bgr:
        img = img.flip(1)                 # what cv2.imread hands back
    return img, labels


class FruitImages(Dataset):
    def __init__(self, arrays: TensorDataset, bgr_to_rgb=False):
        self.arrays, self.bgr_to_rgb = arrays, bgr_to_rgb

    def __len__(self):
        return len(self.arrays)

    def __getitem__(self, i):
        img, label = self.arrays[i]
        if self.bgr_to_rgb:
            img = img[[2, 1, 0]]
        return {"image": (img - MEAN) / STD, "label": label}


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    train_arrays = TensorDataset(*_decode(1200, gen, bgr=False))   # PIL-style decoder: RGB
    test_arrays = TensorDataset(*_decode(450, gen, bgr=True))      # cv2-style decoder: BGR
    train = FruitImages(train_arrays)
    test = FruitImages(test_arrays, bgr_to_rgb=True) if fixed else FruitImages(test_arrays)  # BUG
    return dict(train=train, test=test)


class FruitNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.features(x).amax((2, 3)))


class Trainer:
    def __init__(self, model, lr=3e-3, epochs=5, batch_size=50):
        self.model, self.epochs, self.batch_size = model, epochs, batch_size
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)

    def fit(self, dataset):
        loader = DataLoader(dataset, batch_size=self.batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(1))
        self.model.train()
        for _epoch in range(self.epochs):
            for batch in loader:
                loss = F.cross_entropy(self.model(batch["image"]), batch["label"])
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()

    @torch.no_grad()
    def evaluate(self, dataset):
        self.model.eval()
        correct = 0
        for batch in DataLoader(dataset, batch_size=256):
            correct += (self.model(batch["image"]).argmax(1) == batch["label"]).sum().item()
        return correct / len(dataset)


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    trainer = Trainer(FruitNet())
    trainer.fit(data["train"])
    acc = trainer.evaluate(data["test"])
    return dict(metric=acc, higher_is_better=True,
                evidence=f"held-out accuracy on the test split {acc:.3f}")
