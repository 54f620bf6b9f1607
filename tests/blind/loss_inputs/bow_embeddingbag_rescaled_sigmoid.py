"""Bag-of-words topic classifier (``nn.EmbeddingBag`` + linear head), SGD with Nesterov momentum,
``optimizer.step(closure)``, ``F.cross_entropy``.

Documents are 24 tokens from a vocabulary of 200; each of 8 topics prefers its own words.
The buggy model squashes its scores into (-1, 1) with ``2 * torch.sigmoid(scores) - 1``
("bounded scores, so training is stable"), and the closure feeds them to ``F.cross_entropy``,
which expects unbounded logits: the softmax it takes over values in (-1, 1) can never give a
class more than e^2 / (e^2 + 7) = 0.51 of the mass, the loss stays near its chance level, and
its gradients (through the sigmoid) are small and nearly uniform. Fix: return the raw scores.

Measured (held-out accuracy, higher is better, without gradhunt): buggy 0.609, fixed 0.779 (a
+0.17 margin at the frozen seeds: the squashed scores still rank the right topic first, the
small gradients make it learn slowly).
"""
import torch
from torch import nn
from torch.nn import functional as F

EXPECTED = "PROBABILITIES_AS_LOGITS"

VOCAB = 200
TOPICS = 8
LENGTH = 24
STEPS = 200
BATCH = 32


def make_data(n, topic_words, gen):
    y = torch.randint(0, TOPICS, (n,), generator=gen)
    docs = torch.multinomial(topic_words[y], LENGTH, replacement=True, generator=gen)
    return docs, y


class BagOfWords(nn.Module):
    def __init__(self, *, fixed):
        super().__init__()
        self.fixed = fixed
        self.bag = nn.EmbeddingBag(VOCAB, 32, mode="sum")
        self.head = nn.Linear(32, TOPICS)

    def forward(self, docs):
        scores = self.head(self.bag(docs))
        if self.fixed:
            return scores                               # fix: raw logits
        return 2 * torch.sigmoid(scores) - 1            # bug: squashed into (-1, 1)


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    # every topic: a flat background over the vocabulary plus a bump on 25 of its own words
    topic_words = torch.full((TOPICS, VOCAB), 1.0)
    for k in range(TOPICS):
        topic_words[k, torch.randperm(VOCAB, generator=gen)[:25]] += 3.0
    topic_words /= topic_words.sum(1, keepdim=True)
    x_train, y_train = make_data(2048, topic_words, gen)
    x_test, y_test = make_data(512, topic_words, gen)

    model = BagOfWords(fixed=fixed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    batches = torch.Generator().manual_seed(2)
    for _ in range(STEPS):
        idx = torch.randint(0, len(x_train), (BATCH,), generator=batches)
        docs, labels = x_train[idx], y_train[idx]

        def closure():
            optimizer.zero_grad()
            loss = F.cross_entropy(model(docs), labels)
            loss.backward()
            return loss

        loss = optimizer.step(closure)
        if mon is not None:
            mon.step(loss)

    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
