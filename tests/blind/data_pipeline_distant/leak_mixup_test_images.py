"""DATA_LEAKAGE (near-duplicate): a "robustness" test set made by mixup of two training images.

Model family: small CNN (3 conv layers, global pooling) on 1x16x16 grey images of 4 glyph
classes with 30% wrong labels (crowd annotation). Idiom: ``TensorDataset``s, a ``Trainer``
class with ``fit``/``evaluate``, RMSprop. Bug: the evaluation set is synthesised by mixup --
``0.85 * a + 0.15 * b`` of two images drawn from the TRAINING tensors, labelled as ``a`` --
so every test image is a training image with a faint second one over it, under its memorised
(often wrong) label. Fix: mix images from a held-out pool that never enters training.

Measured (reported test accuracy vs accuracy on fresh images):
buggy 0.965 vs 0.521 (gap +0.444); fixed 0.567 vs 0.521 (gap +0.046).
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "DATA_LEAKAGE"
KEYWORD = "near-duplicate"
LAM = 0.85


def _glyphs(n, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.Generator().manual_seed(4)
    protos = (torch.rand(4, 1, 16, 16, generator=w) > 0.75).float()
    y = torch.randint(0, 4, (n,), generator=g)
    dx = torch.randint(-2, 3, (n,), generator=g)
    x = torch.stack([torch.roll(protos[c], int(s), dims=-1) for c, s in zip(y, dx)])
    x = x + 0.8 * torch.randn(n, 1, 16, 16, generator=g)
    wrong = torch.rand(n, generator=g) < 0.30
    y = torch.where(wrong, (y + torch.randint(1, 4, (n,), generator=g)) % 4, y)
    return x, y


def _mixup(x, y, n, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(0, len(x), (n,), generator=g)
    b = torch.randint(0, len(x), (n,), generator=g)
    return LAM * x[a] + (1 - LAM) * x[b], y[a]


def build(fixed: bool):
    x, y = _glyphs(700, seed=0)
    px, py = _glyphs(300, seed=1)                       # held-out pool
    if fixed:
        tx, ty = _mixup(px, py, 600, seed=2)
    else:
        tx, ty = _mixup(x, y, 600, seed=2)              # BUG: mixed from the training images
    return dict(train=TensorDataset(x, y), test=TensorDataset(tx, ty))


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)

    def fit(self, ds, epochs):
        loader = DataLoader(ds, batch_size=32, shuffle=True,
                            generator=torch.Generator().manual_seed(5))
        for _ in range(epochs):
            for xb, yb in loader:
                loss = nn.functional.cross_entropy(self.model(xb), yb)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()

    @torch.no_grad()
    def evaluate(self, x, y):
        return (self.model(x).argmax(1) == y).float().mean().item()


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(32 * 8 * 8, 4))
    tr = Trainer(model)
    tr.fit(data["train"], epochs=15)
    reported = tr.evaluate(*data["test"].tensors)
    honest = tr.evaluate(*_glyphs(1000, seed=99))
    return dict(metric=honest, higher_is_better=True, reported=reported, honest=honest,
                evidence=f"reported test accuracy {reported:.3f}, on fresh images "
                         f"{honest:.3f} (gap {reported - honest:+.3f})")
