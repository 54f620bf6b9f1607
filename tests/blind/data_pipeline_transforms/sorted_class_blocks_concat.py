"""LABELS_SORTED: a classification loader that yields the classes in blocks.

Model family: MLP classifier with BatchNorm on 8x8 grey "glyph" images (64 -> 128 ->
BatchNorm1d -> ReLU -> 5), Adam, a ``Trainer`` class with an ``epoch`` method. Idiom: an ImageFolder-like layout, one Dataset per
class folder (``ClassFolder``), joined with ``ConcatDataset`` in folder order and loaded with
``DataLoader(..., batch_size=32, shuffle=False)``: each epoch shows all of class 0, then all of
class 1, ..., so every batch but the few at a boundary holds one class: the batch statistics of
BatchNorm remove exactly what the class shares, the model learns from within-class noise, and it
ends every epoch having seen only class 4 for a while. The fixed twin
passes ``shuffle=True``. No test split is handed to the check (``test=None``); the held-out
accuracy is measured on a separate balanced set.

Measured (held-out accuracy, higher is better): 0.47 (buggy) vs 0.997 (fixed).
"""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import ConcatDataset, DataLoader, Dataset

EXPECTED = "LABELS_SORTED"
N_CLASSES = 5


class ClassFolder(Dataset):
    def __init__(self, images, label):
        self.images, self.label = images, label

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i].flatten(), torch.tensor(self.label)


def _prototypes():
    g = torch.Generator().manual_seed(123)
    return torch.randn(N_CLASSES, 8, 8, generator=g)


def _folder(label, n, gen, protos):
    return 0.55 * protos[label] + 0.85 * torch.randn(n, 8, 8, generator=gen)


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    protos = _prototypes()
    folders = [ClassFolder(_folder(c, 240, gen, protos), c) for c in range(N_CLASSES)]
    train = DataLoader(ConcatDataset(folders), batch_size=32, shuffle=fixed,   # BUG: False
                       generator=torch.Generator().manual_seed(1))
    return dict(train=train, test=None)


def _held_out():
    gen = torch.Generator().manual_seed(99)
    protos = _prototypes()
    labels = torch.arange(600) % N_CLASSES
    images = torch.stack([_folder(int(c), 1, gen, protos)[0] for c in labels])
    return images.flatten(1), labels


class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.opt = torch.optim.Adam(model.parameters(), lr=2e-3)

    def epoch(self):
        self.model.train()
        for x, y in self.loader:
            loss = F.cross_entropy(self.model(x), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(),
                          nn.Linear(128, N_CLASSES))
    trainer = Trainer(model, data["train"])
    for _ in range(4):
        trainer.epoch()
    model.eval()
    x, y = _held_out()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    return dict(metric=acc, higher_is_better=True,
                evidence=f"held-out accuracy on a balanced set {acc:.3f}")
