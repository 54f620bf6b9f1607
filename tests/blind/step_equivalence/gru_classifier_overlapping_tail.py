"""GRU sequence classifier; fixed-size micro-batches whose tail chunk is aligned to the end of
the batch, so it overlaps the previous chunk and those rows are counted twice.

Model family: GRU over real-valued sequences (length 20, 3 channels), classifying which of 4
frequency patterns a noisy sequence carries, from the last hidden state.
Idiom: a closure-free ``train_step`` function building a list of chunk start indices (fixed
chunk size for stable shapes, a common trick for compiled/cuDNN kernels), each chunk's mean loss
weighted by ``len(chunk) / n``; Adagrad.
The bug: when ``n`` is not a multiple of the chunk size, the tail chunk starts at ``n - mb``
(so that it has the full size) -- with n=40, mb=16 the chunks are 0..15, 16..31, 24..39 and rows
24..31 are counted twice; the weights sum to 48/40.
The fix: the tail chunk starts where the previous one ended (``starts[-1] + mb``), a ragged
chunk of 8 rows.

Measured (CPU, OMP_NUM_THREADS=1): the buggy step's gradient is that of the per-row weights
written by hand (2/n on rows 24..31, 1/n elsewhere; rel. ~1e-7); against the whole batch's
mean gradient: scale 0.942, rel. error 0.607, cosine 0.842; the loop reports 1.658 where the
batch's mean cross-entropy is 1.385. Held-out accuracy after 150 steps: 0.968 (buggy) vs 0.976
(fixed) -- nearly harmless to quality here, so the test asserts the gradient discrepancy.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = ("STEP_NOT_OBJECTIVE", "twice")
QUALITY_GAP = False

BATCH, MICRO, CLASSES, LENGTH = 40, 16, 4, 20


class GRUClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 32, batch_first=True)
        self.head = nn.Linear(32, CLASSES)

    def forward(self, x):
        _, h = self.gru(x)
        return self.head(h[-1])


def make_batch(gen, n=BATCH):
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    t = torch.arange(LENGTH).float()
    freq = (y.float() + 1.0)[:, None] * (math.pi / 10)
    phase = torch.rand(n, 1, generator=gen) * 2 * math.pi
    base = torch.sin(freq * t[None, :] + phase)
    x = torch.stack([base, torch.cos(freq * t[None, :] + phase), torch.zeros_like(base)], -1)
    return x + 0.8 * torch.randn(n, LENGTH, 3, generator=gen), y


def chunk_starts(n, mb, fixed):
    starts = list(range(0, n - mb + 1, mb))
    covered = starts[-1] + mb
    if covered < n:
        starts.append(covered if fixed else n - mb)
    return starts


def make_train_step(fixed):
    def train_step(model, batch, optimizer):
        x, y = batch
        n = x.shape[0]
        optimizer.zero_grad()
        logged = 0.0
        for s in chunk_starts(n, MICRO, fixed):
            xb, yb = x[s:s + MICRO], y[s:s + MICRO]
            loss = F.cross_entropy(model(xb), yb) * (len(yb) / n)
            loss.backward()
            logged += loss.item()
        optimizer.step()
        return logged
    return train_step


def effective_loss(model, x, y):
    """By hand: per-row cross-entropy with weight 2/n on rows n-mb..2*mb-1, 1/n elsewhere."""
    n = x.shape[0]
    w = torch.ones(n)
    w[n - MICRO:2 * MICRO] = 2.0
    return (F.cross_entropy(model(x), y, reduction="none") * w).sum() / n


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = GRUClassifier()
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
    x, y = make_batch(torch.Generator().manual_seed(1))
    return {"model": model, "loss_fn": nn.CrossEntropyLoss(), "inputs": x, "targets": y,
            "train_step": make_train_step(fixed), "optimizer": optimizer}


def train(fixed: bool, steps: int = 150) -> dict:
    objs = build(fixed)
    model, opt, step = objs["model"], objs["optimizer"], objs["train_step"]
    gen = torch.Generator().manual_seed(2)
    reported, true = [], []
    for _ in range(steps):
        x, y = make_batch(gen)
        with torch.no_grad():
            true.append(float(F.cross_entropy(model(x), y)))
        reported.append(step(model, (x, y), opt))
    x, y = make_batch(torch.Generator().manual_seed(99), n=1000)
    with torch.no_grad():
        acc = float((model(x).argmax(1) == y).float().mean())
    return {"metric": acc, "higher_is_better": True,
            "evidence": f"held-out accuracy {acc:.4f} after {steps} steps; over training the loop "
                        f"reported {sum(reported) / steps:.4f} on average where the batches' "
                        f"mean cross-entropy was {sum(true) / steps:.4f}"}


if __name__ == "__main__":
    from tests.blind.step_equivalence._common import measure_step
    for fixed in (False, True):
        print(fixed, measure_step(build(fixed), effective_loss), train(fixed))
