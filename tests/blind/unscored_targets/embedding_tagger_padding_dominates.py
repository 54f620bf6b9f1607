"""A window tagger built from word embeddings (the left, centre and right word's vectors
concatenated into a small MLP head), trained by a ``train_step`` function with plain SGD.

Bug: batches are padded to the model's maximum length (``padding="max_length"``, 64
positions for sentences of 4-12 words), the tags are padded with an extra ``PAD_TAG`` class the
head also predicts, and the loss is ``F.cross_entropy`` averaged over every position. About 87%
of the scored positions are padding: the model first learns to predict ``PAD_TAG``, the loss
falls quickly, and the real words get a small share of each step. Fixed: the same batches,
``F.cross_entropy(..., ignore_index=PAD_TAG)``.

Measured without gradhunt (held-out tag accuracy on real words): buggy 0.309, fixed 0.881.
"""
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import gradhunt

EXPECTED = "PADDING_SCORED"
PAD_WORD = 0
VOCAB = 120
NUM_TAGS = 6                # real tags 0-5
PAD_TAG = NUM_TAGS          # the extra class the head predicts for padding
MAX_LEN = 64


def word_tags(rng):
    """Each word has a home tag; 30 ambiguous words take the tag of the word before them."""
    home = rng.integers(0, NUM_TAGS, size=VOCAB)
    ambiguous = np.zeros(VOCAB, dtype=bool)
    ambiguous[rng.choice(np.arange(1, VOCAB), size=30, replace=False)] = True
    return home, ambiguous


def make_batch(n, rng, home, ambiguous):
    words = np.full((n, MAX_LEN), PAD_WORD, dtype=np.int64)
    tags = np.full((n, MAX_LEN), PAD_TAG, dtype=np.int64)
    for i in range(n):
        length = int(rng.integers(4, 13))
        w = rng.integers(1, VOCAB, size=length)
        t = home[w].copy()
        for k in range(1, length):
            if ambiguous[w[k]]:
                t[k] = (home[w[k - 1]] + 1) % NUM_TAGS
        words[i, :length], tags[i, :length] = w, t
    return torch.from_numpy(words), torch.from_numpy(tags)


class WindowTagger(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim, padding_idx=PAD_WORD)
        self.head = nn.Sequential(nn.Linear(3 * dim, 64), nn.Tanh(), nn.Linear(64, NUM_TAGS + 1))

    def forward(self, words):
        e = self.embed(words)
        left = F.pad(e, (0, 0, 1, 0))[:, :-1]
        right = F.pad(e, (0, 0, 0, 1))[:, 1:]
        return self.head(torch.cat([left, e, right], dim=-1))


def train_step(model, batch, optimizer, fixed):
    words, tags = batch
    optimizer.zero_grad()
    logits = model(words)
    if fixed:
        loss = F.cross_entropy(logits.reshape(-1, NUM_TAGS + 1), tags.reshape(-1),
                               ignore_index=PAD_TAG)
    else:
        loss = F.cross_entropy(logits.reshape(-1, NUM_TAGS + 1), tags.reshape(-1))
    loss.backward()
    optimizer.step()
    return loss


def run(fixed=False, monitor=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    home, ambiguous = word_tags(rng)
    batches = [make_batch(32, rng, home, ambiguous) for _ in range(300)]
    test_words, test_tags = make_batch(256, rng, home, ambiguous)
    model = WindowTagger()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)

    mon = gradhunt.Monitor(model, optimizer=opt) if monitor else None
    report = None
    try:
        for batch in batches:
            loss = train_step(model, batch, opt, fixed)
            if mon is not None:
                mon.step(loss)
        if mon is not None:
            report = mon.report()
    finally:
        if mon is not None:
            mon.close()

    with torch.no_grad():
        pred = model(test_words).argmax(-1)
    real = test_tags != PAD_TAG
    metric = (pred[real] == test_tags[real]).float().mean().item()
    return {"report": report, "metric": metric, "higher_is_better": True}
