"""PIPELINE_ROWS_MISSING: a WeightedRandomSampler given one weight per CLASS instead of one per row.

Model family: MLP classifier (20 float features -> 64 -> 64 -> 4) on an imbalanced tabular
table (fault types of a pump: 70% / 15% / 10% / 5%), Adam, DataLoader epochs.
Idiom: class-balanced oversampling with ``torch.utils.data.WeightedRandomSampler``. The bug is
written as ``WeightedRandomSampler(class_weights, num_samples=len(ds))``: ``class_weights`` has
4 entries (``1 / counts``), so the sampler draws only the indices 0..3 -- the first four rows of
the table -- 1200 times per pass. The fixed twin passes ``class_weights[labels]`` (one weight
per row). Both sample with replacement (oversampling the rare faults is the point).

Measured (held-out balanced accuracy, higher is better): buggy 0.467 vs fixed 0.855.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

EXPECTED = "PIPELINE_ROWS_MISSING"
PRIORS = (0.70, 0.15, 0.10, 0.05)


def _table(n, gen):
    w = torch.Generator().manual_seed(5)
    centers = 0.45 * torch.randn(4, 20, generator=w)
    y = torch.multinomial(torch.tensor(PRIORS), n, replacement=True, generator=gen)
    x = centers[y] + torch.randn(n, 20, generator=gen)
    return x, y


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    x, y = _table(1200, gen)
    ds = TensorDataset(x, y)
    counts = torch.bincount(y, minlength=4).double()
    class_weights = 1.0 / counts
    if fixed:
        sampler = WeightedRandomSampler(class_weights[y], num_samples=len(ds), replacement=True,
                                        generator=torch.Generator().manual_seed(1))
    else:                                   # BUG: one weight per class, read as one per row
        sampler = WeightedRandomSampler(class_weights, num_samples=len(ds), replacement=True,
                                        generator=torch.Generator().manual_seed(1))
    train = DataLoader(ds, batch_size=64, sampler=sampler)
    test = TensorDataset(*_table(800, gen))
    return dict(train=train, test=test)


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 4))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for _epoch in range(8):
        for xb, yb in data["train"]:
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        x, y = data["test"].tensors
        pred = model(x).argmax(1)
    recalls = [(pred[y == c] == c).float().mean().item() for c in range(4)]
    bal = sum(recalls) / 4
    return dict(metric=bal, higher_is_better=True,
                evidence=f"held-out balanced accuracy {bal:.3f} (per-class recall "
                         f"{[round(r, 2) for r in recalls]})")
