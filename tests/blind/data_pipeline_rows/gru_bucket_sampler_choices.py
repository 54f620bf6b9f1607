"""GRU text classifier on variable-length token sequences; a custom length-bucketing
``batch_sampler`` (sort by length, cut into batches, shuffle the batches) with a per-epoch
seed in the style of DistributedSampler (``set_epoch``); DataLoader epochs with a padding
collate_fn, AdamW.

Task: every sequence holds one "keyword" among filler tokens; the keyword decides the class
(200 keywords, each in three training sentences of one length, as with rare entity names).

Bug: the batches are shuffled with ``rng.choices(batches, k=len(batches))`` (drawn WITH
replacement) instead of ``rng.shuffle(batches)``. The loop never calls ``set_epoch``, so each
epoch draws the same batches: one pass yields 600 rows but only 344 distinct (43% of the rows,
whole batches of them, never come; others come twice or more). Keywords only seen in the lost rows are never learned.
Fix: ``rng.shuffle(batches)``.

Measured (held-out accuracy, the same keywords in new sentences): buggy 0.578, fixed 0.937.
"""
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, Sampler

EXPECTED = "PIPELINE_ROWS_MISSING"
N_KEYWORDS = 200
PER_KEYWORD = 3
N_FILLER = 10
CLASSES = 4
PAD = 0


def _sentences(seed):
    g = torch.Generator().manual_seed(seed)
    key_class = torch.randint(0, CLASSES, (N_KEYWORDS,), generator=torch.Generator().manual_seed(7))
    seqs, labels = [], []
    for k in range(N_KEYWORDS):
        length = int(torch.randint(5, 14, (1,), generator=g))   # one entity's sentences are alike
        for _ in range(PER_KEYWORD):
            toks = torch.randint(1, N_FILLER + 1, (length,), generator=g)
            toks[int(torch.randint(0, length, (1,), generator=g))] = N_FILLER + 1 + k
            seqs.append(toks)
            labels.append(int(key_class[k]))
    return seqs, torch.tensor(labels)


class Sentences(Dataset):
    def __init__(self, seqs, labels):
        self.seqs, self.labels = seqs, labels

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, idx):
        return self.seqs[idx], self.labels[idx]


class BucketBatchSampler(Sampler):
    def __init__(self, lengths, batch_size, fixed, seed=0):
        self.lengths, self.batch_size, self.fixed = lengths, batch_size, fixed
        self.seed, self.epoch = seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        order = sorted(range(len(self.lengths)), key=lambda i: self.lengths[i])
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        rng = random.Random(self.seed + self.epoch)
        if self.fixed:
            rng.shuffle(batches)
        else:
            batches = rng.choices(batches, k=len(batches))   # BUG: with replacement
        return iter(batches)

    def __len__(self):
        return (len(self.lengths) + self.batch_size - 1) // self.batch_size


def pad_collate(items):
    seqs, labels = zip(*items)
    return nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD), torch.stack(labels)


def build(fixed: bool):
    seqs, labels = _sentences(seed=0)
    ds = Sentences(seqs, labels)
    sampler = BucketBatchSampler([len(s) for s in seqs], batch_size=16, fixed=fixed)
    return dict(train=DataLoader(ds, batch_sampler=sampler, collate_fn=pad_collate), test=None)


class GRUClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(N_FILLER + 1 + N_KEYWORDS, 32, padding_idx=PAD)
        self.gru = nn.GRU(32, 48, batch_first=True)
        self.head = nn.Linear(48, CLASSES)

    def forward(self, x):
        out, _ = self.gru(self.emb(x))
        mask = (x != PAD).float().unsqueeze(-1)
        return self.head((out * mask).sum(1) / mask.sum(1))


def train(fixed: bool):
    torch.manual_seed(0)
    loader = build(fixed)["train"]
    model = GRUClassifier()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _epoch in range(15):
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    seqs, labels = _sentences(seed=123)
    with torch.no_grad():
        x = nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD)
        acc = (model(x).argmax(1) == labels).float().mean().item()
    yielded = [i for b in loader.batch_sampler for i in b]
    return dict(metric=acc, higher_is_better=True,
                evidence=f"held-out accuracy {acc:.3f}; one pass yields {len(yielded)} rows, "
                         f"{len(set(yielded))} distinct of {len(loader.dataset)}")
