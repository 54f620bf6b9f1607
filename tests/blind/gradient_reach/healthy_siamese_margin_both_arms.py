"""Healthy: a siamese EmbeddingBag encoder trained through both arms with a margin loss.

Bags of 6 token ids drawn from one of 5 topics' vocabularies (plus shared filler tokens); pairs
of bags from the same or different topics. Both arms are the same encoder and both carry
gradient: ``F.pairwise_distance(f(a), f(b))`` into a contrastive margin loss (this is right:
the loss is about the pair, neither side is a fixed target). Plain loop, SGD + momentum.
Metric: held-out pair verification accuracy (distance below the margin / 2 means same topic).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = None
VOCAB, TOPICS, BAG = 60, 5, 6
MARGIN = 1.0


def _bags(topic, gen):
    own = topic[:, None] * 10 + torch.randint(0, 10, (len(topic), BAG), generator=gen)
    filler = torch.randint(50, VOCAB, (len(topic), BAG), generator=gen)
    return torch.where(torch.rand(len(topic), BAG, generator=gen) < 0.6, own, filler)


def _pairs(n, gen):
    ta = torch.randint(0, TOPICS, (n,), generator=gen)
    same = torch.rand(n, generator=gen) < 0.5
    tb = torch.where(same, ta, (ta + torch.randint(1, TOPICS, (n,), generator=gen)) % TOPICS)
    return _bags(ta, gen), _bags(tb, gen), same.float()


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, 32, mode="mean")
        self.proj = nn.Sequential(nn.ReLU(), nn.Linear(32, 16))

    def forward(self, tokens):
        return self.proj(self.bag(tokens))


def run(*, fixed=True, monitor=False):
    gen = torch.Generator().manual_seed(8)
    test = _pairs(512, gen)
    torch.manual_seed(0)
    model = Encoder()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    mon = None
    if monitor:
        import gradhunt
        mon = gradhunt.Monitor(model, optimizer=optimizer)
    try:
        for step in range(200):
            a, b, same = _pairs(64, gen)
            dist = F.pairwise_distance(model(a), model(b))
            loss = (same * dist ** 2 + (1 - same) * F.relu(MARGIN - dist) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(loss)
    finally:
        if mon is not None:
            mon.close()
    with torch.no_grad():
        a, b, same = test
        guess = (F.pairwise_distance(model(a), model(b)) < MARGIN / 2).float()
        accuracy = (guess == same).float().mean().item()
    return {"report": mon.report() if mon is not None else None,
            "metric": accuracy, "higher_is_better": True}
