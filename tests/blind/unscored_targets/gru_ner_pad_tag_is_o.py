"""A GRU named-entity tagger (log-softmax head into ``nn.NLLLoss``), trained by a small
Trainer class with Adam over padded batches.

Bug: the tag sequences are padded with ``PAD_TAG = TAGS.index("O")`` ("O is 0 anyway") and the
loss is ``nn.NLLLoss(ignore_index=PAD_TAG)``: padding is skipped, but so is every real "O"
token, the most common tag. The tagger never learns to say "O" and marks ordinary words as
entities. Fixed: pad the tags with -100 and use ``nn.NLLLoss(ignore_index=-100)``.

Measured without gradhunt (held-out accuracy on real "O" tokens): buggy 0.000, fixed 1.000.
"""
import numpy as np
import torch
from torch import nn

import gradhunt

EXPECTED = "IGNORED_CLASS"
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
PAD_WORD = 0
FIRST_NAMES, LAST_NAMES = range(1, 11), range(11, 21)
CITIES, CITY_TAILS = range(21, 31), range(31, 36)
PLAIN_WORDS = range(36, 80)
VOCAB = 80


def make_sentences(n, rng):
    sentences = []
    for _ in range(n):
        words, tags = [], []
        while len(words) < rng.integers(6, 14):
            kind = rng.random()
            if kind < 0.15:
                words += [int(rng.choice(FIRST_NAMES)), int(rng.choice(LAST_NAMES))]
                tags += [1, 2]
            elif kind < 0.25:
                words.append(int(rng.choice(CITIES)))
                tags.append(3)
                if rng.random() < 0.5:
                    words.append(int(rng.choice(CITY_TAILS)))
                    tags.append(4)
            else:
                words.append(int(rng.choice(PLAIN_WORDS)))
                tags.append(0)
        sentences.append((words, tags))
    return sentences


def pad_batch(batch, tag_pad):
    length = max(len(w) for w, _ in batch)
    words = torch.full((len(batch), length), PAD_WORD, dtype=torch.long)
    tags = torch.full((len(batch), length), tag_pad, dtype=torch.long)
    for i, (w, t) in enumerate(batch):
        words[i, :len(w)] = torch.tensor(w)
        tags[i, :len(t)] = torch.tensor(t)
    return words, tags


class GRUTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 24, padding_idx=PAD_WORD)
        self.gru = nn.GRU(24, 32, batch_first=True, bidirectional=True)
        self.head = nn.Linear(64, len(TAGS))

    def forward(self, words):
        hidden, _ = self.gru(self.embed(words))
        return torch.log_softmax(self.head(hidden), dim=-1)


class Trainer:
    def __init__(self, model, fixed, monitor):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=5e-3)
        if fixed:
            self.tag_pad = -100
            self.criterion = nn.NLLLoss(ignore_index=-100)
        else:
            self.tag_pad = TAGS.index("O")      # "O is 0 anyway"
            self.criterion = nn.NLLLoss(ignore_index=self.tag_pad)
        self.monitor = gradhunt.Monitor(model, optimizer=self.opt) if monitor else None

    def training_step(self, batch):
        words, tags = pad_batch(batch, self.tag_pad)
        log_probs = self.model(words)
        loss = self.criterion(log_probs.reshape(-1, len(TAGS)), tags.reshape(-1))
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss

    def fit(self, sentences, epochs, batch_size, rng):
        try:
            for _ in range(epochs):
                order = rng.permutation(len(sentences))
                for start in range(0, len(order), batch_size):
                    loss = self.training_step([sentences[i] for i in order[start:start + batch_size]])
                    if self.monitor is not None:
                        self.monitor.step(loss)
            return self.monitor.report() if self.monitor is not None else None
        finally:
            if self.monitor is not None:
                self.monitor.close()


def run(fixed=False, monitor=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    train, test = make_sentences(640, rng), make_sentences(128, rng)
    model = GRUTagger()
    report = Trainer(model, fixed, monitor).fit(train, epochs=5, batch_size=32, rng=rng)

    model.eval()
    words, tags = pad_batch(test, -100)
    with torch.no_grad():
        pred = model(words).argmax(-1)
    o_tokens = tags == TAGS.index("O")
    metric = (pred[o_tokens] == 0).float().mean().item()
    return {"report": report, "metric": metric, "higher_is_better": True}
