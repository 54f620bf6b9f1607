"""Entity-embedding model for tabular churn data (three categorical columns through
``nn.Embedding``, six numeric columns, an MLP head); ``TensorDataset``s of
(categories, numbers, label), a ``train_step`` function, DataLoader epochs, AdamW. About 25%
of the labels are wrong (churn logged late), so no model can honestly reach much above 0.75.

Bug: the test set is built by taking 250 rows of the table and jittering their numeric
columns (``num[idx] + 0.03 * randn``, "so the test rows are not exact copies"), but those rows
stay in the training set: every test row is a near-duplicate of a training row with the same
label, and the network that memorised the noisy labels scores far above its real accuracy.
Fix: drop the test rows from the training set (``keep = ~in_test``) before training.

Measured (reported test accuracy vs accuracy on fresh customers):
buggy 1.000 vs 0.590 (gap +0.410); fixed 0.624 vs 0.585 (gap +0.039).
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "DATA_LEAKAGE"
KEYWORD = "near-duplicate"
N_ROWS = 1000
N_TEST = 250
CARDINALITY = (12, 30, 8)
NUMERIC = 6
LABEL_NOISE = 0.25


def _customers(n, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.Generator().manual_seed(11)                  # the same "world" for every draw
    cat_effect = [torch.randn(c, generator=w) for c in CARDINALITY]
    num_w = torch.randn(NUMERIC, generator=w) * 0.5
    cat = torch.stack([torch.randint(0, c, (n,), generator=g) for c in CARDINALITY], dim=1)
    num = torch.randn(n, NUMERIC, generator=g)
    score = num @ num_w + sum(cat_effect[j][cat[:, j]] for j in range(len(CARDINALITY)))
    y = (score > 0).long()
    flip = torch.rand(n, generator=g) < LABEL_NOISE
    return cat, num, torch.where(flip, 1 - y, y)


def build(fixed: bool):
    cat, num, y = _customers(N_ROWS, seed=0)
    g = torch.Generator().manual_seed(1)
    idx = torch.randperm(N_ROWS, generator=g)[:N_TEST]
    test = TensorDataset(cat[idx], num[idx] + 0.03 * torch.randn(N_TEST, NUMERIC, generator=g),
                         y[idx])
    in_test = torch.zeros(N_ROWS, dtype=torch.bool)
    in_test[idx] = True
    if fixed:
        keep = ~in_test
        train_ds = TensorDataset(cat[keep], num[keep], y[keep])
    else:
        train_ds = TensorDataset(cat, num, y)              # BUG: the test rows stay in
    return dict(train=train_ds, test=test)


class EntityEmbeddingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embs = nn.ModuleList(nn.Embedding(c, 8) for c in CARDINALITY)
        self.mlp = nn.Sequential(nn.Linear(8 * len(CARDINALITY) + NUMERIC, 256), nn.ReLU(),
                                 nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2))

    def forward(self, cat, num):
        parts = [emb(cat[:, j]) for j, emb in enumerate(self.embs)]
        return self.mlp(torch.cat(parts + [num], dim=1))


def train_step(model, batch, opt):
    cat, num, y = batch
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(cat, num), y)
    loss.backward()
    opt.step()
    return loss.item()


@torch.no_grad()
def _accuracy(model, cat, num, y):
    return (model(cat, num).argmax(1) == y).float().mean().item()


def train(fixed: bool):
    torch.manual_seed(0)
    parts = build(fixed)
    loader = DataLoader(parts["train"], batch_size=50, shuffle=True,
                        generator=torch.Generator().manual_seed(2))
    model = EntityEmbeddingNet()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    for _epoch in range(40):
        for batch in loader:
            train_step(model, batch, opt)
    reported = _accuracy(model, *parts["test"].tensors)
    honest = _accuracy(model, *_customers(1000, seed=321))
    return dict(metric=honest, higher_is_better=True, reported=reported, honest=honest,
                evidence=f"reported test accuracy {reported:.3f}, on fresh customers "
                         f"{honest:.3f} (gap {reported - honest:+.3f})")
