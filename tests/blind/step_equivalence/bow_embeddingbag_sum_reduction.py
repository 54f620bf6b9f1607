"""Bag-of-words EmbeddingBag topic classifier; micro-batches from a DataLoader over the batch's
rows, with a summed loss where a mean was meant.

Model family: ``nn.EmbeddingBag(mode="mean", padding_idx=0)`` over fixed-width padded bags, then
a small MLP head (8 topics).
Idiom: a ``train_step`` that wraps the batch in a ``TensorDataset`` and iterates a
``DataLoader(batch_size=16)`` over its rows, dividing each micro-batch's loss by
``len(loader)``; plain SGD.
The bug: the criterion is built as ``nn.CrossEntropyLoss(reduction="sum")`` -- a sum over each
micro-batch's 16 rows, so the step's gradient is the whole batch's mean gradient scaled by 16
(and the loop reports a loss 16x the batch's mean cross-entropy).
The fix: ``nn.CrossEntropyLoss()`` (mean).

Measured (CPU, OMP_NUM_THREADS=1): the buggy step's gradient is the objective's scaled by
16.0 (cosine 1.0); the loop reports 33.29 where the batch's mean cross-entropy is 2.08. After
300 steps held-out cross-entropy 2.024 (buggy) vs 1.029 (fixed); accuracy is not worse (0.705
buggy vs 0.685 fixed): the 16x step makes an over-confident model. Over training the buggy
loop reported 83.0 on average where the batches' mean cross-entropy was 5.19.
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = ("STEP_NOT_OBJECTIVE", "scaled by")
QUALITY_GAP = True

VOCAB, TOPICS, WIDTH = 200, 8, 12
BATCH, MICRO = 64, 16
SCALE = float(MICRO)  # the step's gradient / the objective's gradient
_TOPIC_WORDS = torch.randint(1, VOCAB, (TOPICS, 15), generator=torch.Generator().manual_seed(7))


class BagClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, 32, mode="mean", padding_idx=0)
        self.head = nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, TOPICS))

    def forward(self, words):
        return self.head(self.bag(words))


def make_batch(gen, n=BATCH):
    """Each document: 3..WIDTH words, about half from its topic's word list, the rest noise."""
    y = torch.randint(0, TOPICS, (n,), generator=gen)
    topical = _TOPIC_WORDS[y][torch.arange(n)[:, None],
                              torch.randint(0, 15, (n, WIDTH), generator=gen)]
    noise = torch.randint(1, VOCAB, (n, WIDTH), generator=gen)
    words = torch.where(torch.rand(n, WIDTH, generator=gen) < 0.4, topical, noise)
    length = torch.randint(3, WIDTH + 1, (n, 1), generator=gen)
    return words * (torch.arange(WIDTH)[None, :] < length), y


def make_train_step(fixed):
    criterion = nn.CrossEntropyLoss() if fixed else nn.CrossEntropyLoss(reduction="sum")

    def train_step(model, batch, optimizer):
        words, topics = batch
        loader = DataLoader(TensorDataset(words, topics), batch_size=MICRO, shuffle=False)
        optimizer.zero_grad()
        running = 0.0
        for wb, tb in loader:
            loss = criterion(model(wb), tb) / len(loader)
            loss.backward()
            running += loss.item()
        optimizer.step()
        return running
    return train_step


def effective_loss(model, words, topics):
    """By hand: the whole batch's mean cross-entropy times the micro-batch size."""
    return nn.functional.cross_entropy(model(words), topics) * MICRO


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = BagClassifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    x, y = make_batch(torch.Generator().manual_seed(1))
    return {"model": model, "loss_fn": nn.CrossEntropyLoss(), "inputs": x, "targets": y,
            "train_step": make_train_step(fixed), "optimizer": optimizer}


def train(fixed: bool, steps: int = 300) -> dict:
    objs = build(fixed)
    model, opt, step = objs["model"], objs["optimizer"], objs["train_step"]
    gen = torch.Generator().manual_seed(2)
    reported, true = [], []
    for _ in range(steps):
        words, topics = make_batch(gen)
        with torch.no_grad():
            true.append(float(nn.functional.cross_entropy(model(words), topics)))
        reported.append(step(model, (words, topics), opt))
    x, y = make_batch(torch.Generator().manual_seed(99), n=2000)
    with torch.no_grad():
        scores = model(x)
        acc = float((scores.argmax(1) == y).float().mean())
        ce = float(nn.functional.cross_entropy(scores, y))
    return {"metric": ce, "higher_is_better": False,
            "evidence": f"held-out cross-entropy {ce:.4f} (accuracy {acc:.4f}) after {steps} "
                        f"steps; over training the loop "
                        f"reported {sum(reported) / steps:.4f} on average where the batches' "
                        f"mean cross-entropy was {sum(true) / steps:.4f}"}


if __name__ == "__main__":
    from tests.blind.step_equivalence._common import measure_step
    for fixed in (False, True):
        print(fixed, measure_step(build(fixed), effective_loss), train(fixed))
