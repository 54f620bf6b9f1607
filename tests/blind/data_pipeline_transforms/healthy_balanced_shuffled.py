"""HEALTHY: a classification loader with class-balanced, shuffled batches; one shared transform.

Model family: small CNN classifier (conv-ReLU-pool, conv-ReLU, global pool, linear) on 3x8x8
images of four classes, SGD with Nesterov momentum. Idiom: a ``TensorDataset`` of raw images
wrapped by a ``Transformed`` Dataset; one ``transform`` object (per-channel standardisation with
the training statistics, as a ``torch.nn.Module`` run under ``no_grad``) is given to both the
train and the test wrapper. The training DataLoader uses a ``BalancedBatchSampler``
(``batch_sampler=``): each epoch it reshuffles every class's indices with its seeded generator
and yields batches of 8 per class in a random order inside the batch. Nothing is wrong: gradhunt
must stay quiet. ``build(fixed=...)`` / ``train(fixed=...)`` have the pairs' signature; both
values give the same healthy pipeline.

Measured: held-out accuracy 1.00.
"""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, Sampler, TensorDataset

EXPECTED = None
N_CLASSES, PER_CLASS_IN_BATCH = 4, 8


class ChannelStandardize(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", mean.view(3, 1, 1))
        self.register_buffer("std", std.view(3, 1, 1))

    @torch.no_grad()
    def forward(self, img):
        return (img - self.mean) / self.std


class Transformed(Dataset):
    def __init__(self, base, transform):
        self.base, self.transform = base, transform

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        img, label = self.base[i]
        return self.transform(img), label


class BalancedBatchSampler(Sampler):
    def __init__(self, labels, per_class, seed=0):
        self.by_class = [torch.nonzero(labels == c).flatten() for c in range(N_CLASSES)]
        self.per_class = per_class
        self.gen = torch.Generator().manual_seed(seed)

    def __len__(self):
        return min(len(ix) for ix in self.by_class) // self.per_class

    def __iter__(self):
        shuffled = [ix[torch.randperm(len(ix), generator=self.gen)] for ix in self.by_class]
        for b in range(len(self)):
            batch = torch.cat([ix[b * self.per_class:(b + 1) * self.per_class]
                               for ix in shuffled])
            yield batch[torch.randperm(len(batch), generator=self.gen)].tolist()


def _make(n, gen):
    labels = torch.randperm(n, generator=gen) % N_CLASSES
    colour = torch.tensor([[1.0, 0.2, 0.2], [0.2, 1.0, 0.2], [0.2, 0.2, 1.0], [0.8, 0.8, 0.2]])
    coords = torch.arange(8, dtype=torch.float32)
    ramp = (coords.view(1, 8) + coords.view(8, 1)) / 14.0
    img = (colour[labels].view(n, 3, 1, 1) * ramp * (0.7 + 0.6 * torch.rand(n, 1, 1, 1,
                                                                            generator=gen))
           + 0.3 * torch.randn(n, 3, 8, 8, generator=gen))
    return img * 40 + 100, labels                    # raw, camera-like units


def build(fixed: bool = True):
    gen = torch.Generator().manual_seed(0)
    x_train, y_train = _make(960, gen)
    x_test, y_test = _make(320, gen)
    transform = ChannelStandardize(x_train.mean((0, 2, 3)), x_train.std((0, 2, 3)))
    train_ds = Transformed(TensorDataset(x_train, y_train), transform)
    train = DataLoader(train_ds, batch_sampler=BalancedBatchSampler(y_train, PER_CLASS_IN_BATCH))
    test = Transformed(TensorDataset(x_test, y_test), transform)
    return dict(train=train, test=test)


def train(fixed: bool = True):
    torch.manual_seed(0)
    data = build(fixed)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, N_CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    for _epoch in range(6):
        for x, y in data["train"]:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        x, y = next(iter(DataLoader(data["test"], batch_size=len(data["test"]))))
        acc = (model(x).argmax(1) == y).float().mean().item()
    return dict(metric=acc, higher_is_better=True, evidence=f"held-out accuracy {acc:.3f}")
