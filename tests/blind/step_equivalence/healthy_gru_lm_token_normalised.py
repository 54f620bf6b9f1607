"""HEALTHY: GRU character language model, padded sequences with ``-100`` labels, accumulation
over ``torch.split`` micro-batches normalised by the whole window's count of scored tokens.

Model family: embedding + 2-layer GRU + linear head, next-token targets (B, T) with -100 on
padding; real lengths 3..32 in random order, so the micro-batches' token counts differ.
Idiom: a plain ``train_step``; Adam; each micro-batch's ``reduction="sum"`` cross-entropy
divided by ``num_items_in_batch`` counted over the whole batch before the loop. The step's
gradient is the gradient of the whole batch's token-mean (rel. error ~1e-7, measured in
test_pairs.py).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

V, T, BATCH, MICRO = 28, 32, 12, 4


class GRULM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 32)
        self.gru = nn.GRU(32, 48, num_layers=2, batch_first=True)
        self.head = nn.Linear(48, V)

    def forward(self, ids):
        out, _ = self.gru(self.emb(ids))
        return self.head(out)


def lm_loss(logits, labels):
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)


def make_batch(gen, n=BATCH):
    lengths = torch.randint(3, T + 1, (n,), generator=gen)
    start = torch.randint(1, V, (n, 1), generator=gen)
    seq = (start * torch.arange(1, T + 2) + torch.arange(T + 1) // 3) % (V - 1) + 1
    real = torch.arange(T)[None, :] < lengths[:, None]
    ids = torch.where(real, seq[:, :-1], torch.zeros_like(seq[:, :-1]))
    labels = torch.where(real, seq[:, 1:], torch.full_like(seq[:, 1:], -100))
    return ids, labels


def train_step(model, batch, optimizer):
    ids, labels = batch
    optimizer.zero_grad()
    num_items_in_batch = (labels != -100).sum()
    total = 0.0
    for ids_mb, labels_mb in zip(torch.split(ids, MICRO), torch.split(labels, MICRO)):
        logits = model(ids_mb)
        loss = F.cross_entropy(logits.flatten(0, 1), labels_mb.flatten(), ignore_index=-100,
                               reduction="sum") / num_items_in_batch
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def build(fixed: bool = True) -> dict:
    assert fixed
    torch.manual_seed(0)
    model = GRULM()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    ids, labels = make_batch(torch.Generator().manual_seed(1))
    return {"model": model, "loss_fn": lm_loss, "inputs": ids, "targets": labels,
            "train_step": train_step, "optimizer": optimizer}
