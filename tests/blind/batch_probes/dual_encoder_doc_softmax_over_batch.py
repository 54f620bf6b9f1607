"""A query/document relevance model (two embedding towers; dict inputs ``query_ids``,
``doc_ids``); the document tower's attention pooling normalises its position scores with
``softmax(dim=0)`` (over the batch) where ``dim=1`` (over the document's positions) was meant.
A Trainer class with ``fit``/``evaluate``, AdamW, BCE on the dot score.
Bug real: log-loss when each query/document pair is scored on its own."""
import copy
import functools

import torch
import torch.nn.functional as F
from torch import nn

from tests.blind.batch_probes._common import seeded

EXPECTED = "BATCH_MIXING"
VOCAB, TOPICS, PER_TOPIC, NOISE0 = 64, 5, 8, 40   # topic k: tokens 8k..8k+7; noise: 40..63


def make_pairs(n, gen):
    """A query of 4 topic tokens, a document of 12 tokens (4 of its topic, 8 noise); relevant
    when the topics match (half of the pairs)."""
    qt = torch.randint(0, TOPICS, (n,), generator=gen)
    rel = torch.rand(n, generator=gen) < 0.5
    dt = torch.where(rel, qt, (qt + torch.randint(1, TOPICS, (n,), generator=gen)) % TOPICS)
    q = qt[:, None] * PER_TOPIC + torch.randint(0, PER_TOPIC, (n, 4), generator=gen)
    d = torch.randint(NOISE0, VOCAB, (n, 12), generator=gen)
    pos = torch.rand(n, 12, generator=gen).argsort(1)[:, :4]
    d.scatter_(1, pos, dt[:, None] * PER_TOPIC + torch.randint(0, PER_TOPIC, (n, 4),
                                                                generator=gen))
    return q, d, rel.float()


class DualEncoder(nn.Module):
    def __init__(self, fixed, dim=24):
        super().__init__()
        self.fixed = fixed
        self.q_emb = nn.Embedding(VOCAB, dim)
        self.d_emb = nn.Embedding(VOCAB, dim)
        self.d_attn = nn.Linear(dim, 1)
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, query_ids, doc_ids):
        q = self.q_emb(query_ids).mean(1)
        d = self.d_emb(doc_ids)                           # (B, T, D)
        scores = self.d_attn(d).squeeze(-1)               # (B, T)
        weights = scores.softmax(dim=1 if self.fixed else 0)
        doc = (weights.unsqueeze(-1) * d).sum(1)
        return (q * doc).sum(-1) + self.bias


class Trainer:
    def __init__(self, model, lr=1e-2, batch_size=64):
        self.model, self.batch_size = model, batch_size
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)

    def fit(self, q, d, y, epochs, gen):
        self.model.train()
        for _ in range(epochs):
            order = torch.randperm(len(y), generator=gen)
            for s in range(0, len(y), self.batch_size):
                i = order[s: s + self.batch_size]
                loss = F.binary_cross_entropy_with_logits(self.model(q[i], d[i]), y[i])
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        self.model.eval()

    @torch.no_grad()
    def evaluate(self, q, d, y, batch_size):
        logits = torch.cat([self.model(q[s: s + batch_size], d[s: s + batch_size])
                            for s in range(0, len(y), batch_size)])
        loss = F.binary_cross_entropy_with_logits(logits, y).item()
        return loss, ((logits > 0).float() == y).float().mean().item()


@functools.lru_cache(maxsize=None)
def _fit(fixed):
    torch.manual_seed(0)
    gen = seeded(11)
    trainer = Trainer(DualEncoder(fixed))
    trainer.fit(*make_pairs(2048, gen), epochs=6, gen=gen)
    return trainer, make_pairs(500, seeded(12))


def build(fixed):
    trainer, (q, d, _y) = _fit(fixed)
    return dict(model=copy.deepcopy(trainer.model),
                inputs={"query_ids": q[:16].clone(), "doc_ids": d[:16].clone()}, options={})


def train(fixed):
    trainer, (q, d, y) = _fit(fixed)
    single_loss, single_acc = trainer.evaluate(q, d, y, batch_size=1)
    batch_loss, batch_acc = trainer.evaluate(q, d, y, batch_size=64)
    return dict(metric=single_loss, higher_is_better=False,
                evidence=dict(single_logloss=round(single_loss, 3),
                              single_acc=round(single_acc, 3),
                              batch64_logloss=round(batch_loss, 3),
                              batch64_acc=round(batch_acc, 3)))
