"""PIPELINE_ROWS_MISSING: np.array_split applied twice in a micro-batching batch_sampler, and
only the first micro-batch of each batch yielded.

Model family: small CNN (2 conv + linear) on 1x12x16 "spectrogram" patches of 6 call types,
SGD with momentum and gradient accumulation over micro-batches (a plain loop that steps every
``ACCUM`` micro-batches). Idiom: a custom ``batch_sampler`` class. ``__iter__`` permutes the
rows (``np.random.default_rng(self.seed + self.epoch)``), cuts the permutation into batches with
``np.array_split(perm, n_batches)`` and each batch into ``ACCUM`` micro-batches with a second
``np.array_split``; the buggy twin then writes ``yield micro[0].tolist()`` (one micro-batch per
batch) where the fixed twin writes ``for m in micro: yield m.tolist()``. One pass yields a
quarter of the rows (150 of 600); the sampler's ``epoch`` is never advanced, so it is the SAME
quarter every epoch (in both twins the order repeats; only the buggy one loses rows).

Measured (held-out accuracy, higher is better): buggy 0.232 vs fixed 0.552.
"""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "PIPELINE_ROWS_MISSING"
ACCUM = 4


class MicroBatchSampler:
    def __init__(self, n, batch_size, accum, seed=0, fixed=True):
        self.n, self.batch_size, self.accum, self.seed, self.fixed = n, batch_size, accum, seed, fixed
        self.epoch = 0

    def __iter__(self):
        perm = np.random.default_rng(self.seed + self.epoch).permutation(self.n)
        for batch in np.array_split(perm, max(1, self.n // self.batch_size)):
            micro = np.array_split(batch, self.accum)
            if self.fixed:
                for m in micro:
                    yield m.tolist()
            else:
                yield micro[0].tolist()          # BUG: the other micro-batches are dropped

    def __len__(self):
        return max(1, self.n // self.batch_size) * self.accum


def _calls(n, gen):
    w = torch.Generator().manual_seed(9)
    templates = torch.randn(6, 1, 12, 16, generator=w)
    templates = nn.functional.avg_pool2d(templates, 3, 1, 1) * 2.0
    y = torch.randint(0, 6, (n,), generator=gen)
    shift = torch.randint(-3, 4, (n,), generator=gen)
    x = torch.stack([torch.roll(templates[c], int(s), dims=-1) for c, s in zip(y, shift)])
    x = x + 1.0 * torch.randn(n, 1, 12, 16, generator=gen)
    return x, y


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    ds = TensorDataset(*_calls(600, gen))
    sampler = MicroBatchSampler(len(ds), batch_size=64, accum=ACCUM, fixed=fixed)
    train = DataLoader(ds, batch_sampler=sampler)
    return dict(train=train, test=TensorDataset(*_calls(600, gen)))


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(32, 6))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _epoch in range(12):
        opt.zero_grad()
        for i, (xb, yb) in enumerate(data["train"]):
            loss = nn.functional.cross_entropy(model(xb), yb) / ACCUM
            loss.backward()
            if (i + 1) % ACCUM == 0:
                opt.step()
                opt.zero_grad()
    with torch.no_grad():
        x, y = data["test"].tensors
        acc = (model(x).argmax(1) == y).float().mean().item()
    return dict(metric=acc, higher_is_better=True, evidence=f"held-out accuracy {acc:.3f}")
