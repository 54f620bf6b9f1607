"""TRANSFORM_ONE_SIDED: a random time shift of a sequence, not of its per-step labels.

Model family: GRU sequence tagger (GRU 32 units over 2 input features, linear head per step, 3
tags: rising / flat / falling), Adam with gradient clipping, a ``train_step`` function over
DataLoader epochs. Idiom: variable-length sequences, tuple samples ``(x, tags)``, a
``collate_fn`` that pads with ``pad_sequence`` (tags padded with -100, ignored by the loss). The
augmentation ``random_time_shift(x, tags)`` draws ``shift = torch.randint(-4, 5, ())`` and
returns ``torch.roll(x, shift, dims=0), tags``: the signal moves, the tags stay where they were.
The fixed twin uses ``random_time_shift_aligned``, which returns
``torch.roll(tags, shift, dims=0)`` as well. Train and test are handed
over as Datasets; the test split is not augmented.

Measured (held-out per-step tag accuracy, higher is better): 0.74 (buggy) vs 0.89 (fixed).
"""
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

EXPECTED = "TRANSFORM_ONE_SIDED"


def random_time_shift(x, tags):
    shift = int(torch.randint(-4, 5, ()))
    return torch.roll(x, shift, dims=0), tags          # BUG: the tags are not shifted


def random_time_shift_aligned(x, tags):               # the fix
    shift = int(torch.randint(-4, 5, ()))
    return torch.roll(x, shift, dims=0), torch.roll(tags, shift, dims=0)


class TrendSequences(Dataset):
    def __init__(self, seqs, tags, augment=None):
        self.seqs, self.tags, self.augment = seqs, tags, augment

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, i):
        x, tags = self.seqs[i], self.tags[i]
        if self.augment is not None:
            x, tags = self.augment(x, tags)
        return x, tags


def collate(samples):
    xs, ts = zip(*samples)
    return pad_sequence(xs, batch_first=True), pad_sequence(ts, batch_first=True,
                                                            padding_value=-100)


def _make(n, gen):
    seqs, tags = [], []
    for _ in range(n):
        length = int(torch.randint(24, 41, (), generator=gen))
        regime = torch.randint(0, 3, (length,), generator=gen)
        # regimes last a few steps: smooth the random draw by repeating every 4th value
        regime = regime[(torch.arange(length) // 4) * 4]
        slope = torch.tensor([0.6, 0.0, -0.6])[regime]
        level = torch.cumsum(slope + 0.15 * torch.randn(length, generator=gen), 0)
        level = level - level.mean()
        x = torch.stack([slope + 0.3 * torch.randn(length, generator=gen),
                         level / (level.std() + 1e-3)], dim=1)
        seqs.append(x)
        tags.append(regime)
    return seqs, tags


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    augment = random_time_shift_aligned if fixed else random_time_shift
    train = TrendSequences(*_make(600, gen), augment=augment)
    test = TrendSequences(*_make(200, gen))
    return dict(train=train, test=test)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(2, 32, batch_first=True)
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        return self.head(self.gru(x)[0])


def train_step(model, batch, opt):
    x, tags = batch
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, 3), tags.reshape(-1), ignore_index=-100)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    loader = DataLoader(data["train"], batch_size=32, shuffle=True, collate_fn=collate,
                        generator=torch.Generator().manual_seed(1))
    model = Tagger()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _epoch in range(6):
        for batch in loader:
            train_step(model, batch, opt)
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, tags in DataLoader(data["test"], batch_size=200, collate_fn=collate):
            pred = model(x).argmax(-1)
            keep = tags != -100
            correct += (pred[keep] == tags[keep]).sum().item()
            total += keep.sum().item()
    acc = correct / total
    return dict(metric=acc, higher_is_better=True,
                evidence=f"held-out per-step tag accuracy {acc:.3f}")
