"""Tiny patch-attention image classifier (ViT-like); gradient accumulation whose
``optimizer.step()`` sits inside the micro-batch loop behind ``if (i + 1) % accum_steps == 0``,
with ``accum_steps = n // micro_batch`` -- floored, so with 36 rows in micro-batches of 8 (five
micro-batches: 8, 8, 8, 8, 4) the step fires after the fourth and the last micro-batch's
backward lands after the step: rows 32..35 never reach the update (their gradient is cleared
by the next step's ``zero_grad``).

Model family: attention (patch embedding of 8x8 images into 4x4 patches, learned positions, one
``nn.TransformerEncoderLayer``, mean pooling).
Idiom: a ``VitTrainer`` class with ``train_step``; micro-batches by ``Tensor.split``; the loss
of each micro-batch weighted by its share of the rows; ``zero_grad`` after the step inside the
``if``; AdamW.
The bug: ``accum_steps = n // self.micro_batch``.
The fix: ``accum_steps = math.ceil(n / self.micro_batch)``.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = ("STEP_NOT_OBJECTIVE", "dropped")
N, MB, D, C = 36, 8, 32, 3


class TinyViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Linear(16, D)
        self.pos = nn.Parameter(torch.randn(4, D) * 0.1)
        self.block = nn.TransformerEncoderLayer(D, 4, 64, dropout=0.0, batch_first=True,
                                                norm_first=True)
        self.head = nn.Linear(D, C)

    def forward(self, img):
        b = img.shape[0]
        p = img.reshape(b, 2, 4, 2, 4).permute(0, 1, 3, 2, 4).reshape(b, 4, 16)
        h = self.block(self.patch(p) + self.pos)
        return self.head(h.mean(1))


def make_batch(gen, n=N):
    y = torch.randint(0, C, (n,), generator=gen)
    img = 0.5 * torch.randn(n, 8, 8, generator=gen)
    for k in range(C):                      # class k: a bright quadrant
        r, c = divmod(k, 2)
        img[y == k, r * 4:(r + 1) * 4, c * 4:(c + 1) * 4] += 1.0
    return img, y


class VitTrainer:
    def __init__(self, fixed, micro_batch=MB):
        self.fixed = fixed
        self.micro_batch = micro_batch

    def train_step(self, model, batch, optimizer):
        x, y = batch
        n = x.shape[0]
        if self.fixed:
            accum_steps = math.ceil(n / self.micro_batch)
        else:
            accum_steps = n // self.micro_batch
        optimizer.zero_grad()
        logged = 0.0
        for i, (xb, yb) in enumerate(zip(x.split(self.micro_batch), y.split(self.micro_batch))):
            loss = F.cross_entropy(model(xb), yb) * (xb.shape[0] / n)
            loss.backward()
            logged += loss.item()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        return logged


def effective_loss(model, x, y):
    keep = (x.shape[0] // MB) * MB
    return F.cross_entropy(model(x[:keep]), y[:keep], reduction="sum") / x.shape[0]


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = TinyViT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    x, y = make_batch(torch.Generator().manual_seed(5))
    return {"model": model, "loss_fn": F.cross_entropy, "inputs": x, "targets": y,
            "train_step": VitTrainer(fixed).train_step, "optimizer": optimizer}
