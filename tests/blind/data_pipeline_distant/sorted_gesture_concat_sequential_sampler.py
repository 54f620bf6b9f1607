"""LABELS_SORTED: a gesture classifier fed class blocks through an explicit SequentialSampler.

Model family: GRU (hidden 32) over 3-axis accelerometer sequences (length 30) of 5 gestures
(circle, shake, tap, swipe, tilt as frequency/axis patterns), linear head, Adam, a plain loop.
Idiom: one ``GestureFolder(label)`` Dataset per gesture recorded in its own session,
``torch.utils.data.ConcatDataset`` of the five, and
``DataLoader(ds, batch_size=25, sampler=SequentialSampler(ds))`` (written out "to make the
order reproducible"): every batch holds one gesture, the blocks come in class order, and each
epoch ends on gesture 4. The test set is a shuffled mix. Fix:
``sampler=RandomSampler(ds, generator=torch.Generator().manual_seed(1))``.

Measured (held-out accuracy, higher is better): buggy 0.587 vs fixed 0.890.
"""
import torch
from torch import nn
from torch.utils.data import ConcatDataset, DataLoader, Dataset, RandomSampler, SequentialSampler

EXPECTED = "LABELS_SORTED"
L = 30


def _gesture(label, n, gen):
    t = torch.arange(L).float()
    freq = 0.1 + 0.07 * label
    axis = label % 3
    phase = torch.rand(n, 1, generator=gen) * 6.28
    x = 0.4 * torch.randn(n, L, 3, generator=gen)
    x[:, :, axis] += torch.sin(freq * t + phase)
    return x


class GestureFolder(Dataset):
    def __init__(self, label, n, gen):
        self.x = _gesture(label, n, gen)
        self.label = label

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.label


class GRUClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 32, batch_first=True)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        return self.head(self.gru(x)[0][:, -1])


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    ds = ConcatDataset([GestureFolder(c, 150, gen) for c in range(5)])
    if fixed:
        sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(1))
    else:
        sampler = SequentialSampler(ds)                  # BUG: class blocks in order
    train = DataLoader(ds, batch_size=25, sampler=sampler)
    tests = ConcatDataset([GestureFolder(c, 60, gen) for c in range(5)])
    return dict(train=train, test=tests)


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = GRUClassifier()
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for _epoch in range(8):
        for xb, yb in data["train"]:
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        xb, yb = next(iter(DataLoader(data["test"], batch_size=300, shuffle=True,
                                      generator=torch.Generator().manual_seed(2))))
        acc = (model(xb).argmax(1) == yb).float().mean().item()
    return dict(metric=acc, higher_is_better=True, evidence=f"held-out accuracy {acc:.3f}")
