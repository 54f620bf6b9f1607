"""TRANSFORM_SHIFT: the /255 scaling (a ToTensor-like step) runs on the training images only.

Model family: small CNN classifier (two 3x3 conv layers, global average pool, linear head) on
3x16x16 uint8 "photos" of four texture classes, SGD with momentum, a ``train_step`` function
called over DataLoader epochs. Idiom: hand-written torchvision-style transforms,
``Compose([ToFloatTensor(), Normalize(mean, std)])`` for training; the evaluation transform was
written as ``Compose([AsFloat(), Normalize(mean, std)])``: it converts the uint8 array with
``.float()`` but never divides by 255, so test pixels reach the network in 0..255 while training
pixels were in 0..1 before the same Normalize. Both splits are handed over as DataLoaders
(batch_size 64 and 256). The fixed twin uses the training transform for the test split too.

Measured (held-out accuracy through the test pipeline, higher is better): 0.35 (buggy) vs 1.00 (fixed).
"""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

EXPECTED = "TRANSFORM_SHIFT"
MEAN = torch.tensor([0.45, 0.50, 0.40]).view(3, 1, 1)
STD = torch.tensor([0.175, 0.157, 0.193]).view(3, 1, 1)


class ToFloatTensor:                      # what torchvision's ToTensor does to a uint8 image
    def __call__(self, img):
        return img.to(torch.float32).div(255.0)


class AsFloat:
    def __call__(self, img):
        return img.to(torch.float32)


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, img):
        return (img - self.mean) / self.std


class Compose:
    def __init__(self, steps):
        self.steps = steps

    def __call__(self, img):
        for step in self.steps:
            img = step(img)
        return img


class TextureImages(Dataset):
    def __init__(self, images, labels, transform):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.transform(self.images[i]), self.labels[i]


def _make_images(n, gen):
    labels = torch.arange(n) % 4
    labels = labels[torch.randperm(n, generator=gen)]
    coords = torch.arange(16, dtype=torch.float32)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    phase = torch.rand(n, 1, 1, generator=gen) * 6.28
    freq = 0.6 + 0.5 * torch.rand(n, 1, 1, generator=gen)
    patterns = torch.stack([
        torch.sin(freq * xx + phase), torch.sin(freq * yy + phase),
        torch.sin(freq * (xx + yy) * 0.7 + phase), torch.sin(freq * (xx - yy) * 0.7 + phase)])
    pat = patterns[labels, torch.arange(n)]                          # (n, 16, 16)
    tint = torch.tensor([1.0, 0.8, 1.2]).view(1, 3, 1, 1)
    base = torch.tensor([0.45, 0.50, 0.40]).view(1, 3, 1, 1)
    img = base + 0.18 * pat.unsqueeze(1) * tint + 0.12 * torch.randn(n, 3, 16, 16, generator=gen)
    return (img.clamp(0, 1) * 255).round().to(torch.uint8), labels


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    x_train, y_train = _make_images(1200, gen)
    x_test, y_test = _make_images(400, gen)
    train_tf = Compose([ToFloatTensor(), Normalize(MEAN, STD)])
    if fixed:
        test_tf = train_tf
    else:
        test_tf = Compose([AsFloat(), Normalize(MEAN, STD)])     # BUG: no /255 on the test side
    train = DataLoader(TextureImages(x_train, y_train, train_tf), batch_size=64, shuffle=True,
                       generator=torch.Generator().manual_seed(1))
    test = DataLoader(TextureImages(x_test, y_test, test_tf), batch_size=256, shuffle=False)
    return dict(train=train, test=test)


class TextureNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x))
        return self.head(x.mean((2, 3)))


def train_step(model, batch, optimizer):
    images, labels = batch
    loss = F.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = TextureNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _epoch in range(6):
        for batch in data["train"]:
            train_step(model, batch, optimizer)
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, labels in data["test"]:
            correct += (model(images).argmax(1) == labels).sum().item()
            total += len(labels)
    acc = correct / total
    return dict(metric=acc, higher_is_better=True,
                evidence=f"held-out accuracy through the test DataLoader {acc:.3f}")
