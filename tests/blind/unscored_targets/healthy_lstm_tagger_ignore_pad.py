"""Healthy: an LSTM part-of-speech tagger over a ``DataLoader`` whose ``collate_fn`` pads words
with 0 and tags with -100, scored by ``nn.CrossEntropyLoss(ignore_index=-100)`` on (N, C, T)
logits, RMSprop, a few epochs. Padding is about half of each batch but never reaches the loss,
and every real tag id (0 included) is scored.

Measured without gradhunt (held-out tag accuracy on real words): 0.998.
"""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

import gradhunt

VOCAB = 60
NUM_TAGS = 5


def make_sentences(n, rng, home):
    out = []
    for _ in range(n):
        words = rng.integers(1, VOCAB, size=int(rng.integers(3, 16)))
        tags = home[words].copy()
        tags[1:][words[1:] % 7 == 0] = (home[words[:-1]][words[1:] % 7 == 0] + 2) % NUM_TAGS
        out.append((torch.from_numpy(words), torch.from_numpy(tags)))
    return out


def collate(batch):
    words = nn.utils.rnn.pad_sequence([w for w, _ in batch], batch_first=True, padding_value=0)
    tags = nn.utils.rnn.pad_sequence([t for _, t in batch], batch_first=True, padding_value=-100)
    return words, tags


class LSTMTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 24, padding_idx=0)
        self.lstm = nn.LSTM(24, 32, batch_first=True)
        self.out = nn.Linear(32, NUM_TAGS)

    def forward(self, words):
        hidden, _ = self.lstm(self.embed(words))
        return self.out(hidden).transpose(1, 2)          # (N, C, T) for the loss


def run(fixed=True, monitor=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    home = rng.integers(0, NUM_TAGS, size=VOCAB)
    train, test = make_sentences(800, rng, home), make_sentences(200, rng, home)
    loader = DataLoader(train, batch_size=32, shuffle=True, collate_fn=collate,
                        generator=torch.Generator().manual_seed(0))
    model = LSTMTagger()
    opt = torch.optim.RMSprop(model.parameters(), lr=5e-3)
    criterion = nn.CrossEntropyLoss(ignore_index=-100)

    mon = gradhunt.Monitor(model, optimizer=opt) if monitor else None
    report = None
    try:
        for epoch in range(6):
            model.train()
            for words, tags in loader:
                opt.zero_grad()
                loss = criterion(model(words), tags)
                loss.backward()
                opt.step()
                if mon is not None:
                    mon.step(loss)
        if mon is not None:
            report = mon.report()
    finally:
        if mon is not None:
            mon.close()

    model.eval()
    words, tags = collate(test)
    with torch.no_grad():
        pred = model(words).argmax(1)
    real = tags != -100
    metric = (pred[real] == tags[real]).float().mean().item()
    return {"report": report, "metric": metric, "higher_is_better": True}
