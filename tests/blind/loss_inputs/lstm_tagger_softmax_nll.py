"""LSTM sequence tagger over tokens, DataLoader with epochs, RMSprop, per-token NLLLoss.

Synthetic tagging: 30 word types, 12 tags; a word's tag depends on the word and on the kind of
the word before it (ambiguous words, as in part-of-speech tagging), so the tagger needs its
recurrent state. The buggy model ends in ``F.softmax(self.out(h), dim=-1)`` where
``F.log_softmax`` was meant, and the loop computes ``nn.NLLLoss()(probs.permute(0, 2, 1), tags)``
(input (N, C, T), target (N, T)): NLLLoss takes log-probabilities, so it minimises ``-p[tag]``
instead of ``-log p[tag]``; tokens the model gets confidently wrong have p[tag] near 0 and nearly
no gradient, and training stalls. Fix: ``F.log_softmax``.

Measured (held-out per-token accuracy, higher is better, without gradhunt): buggy 0.704, fixed 0.997.
"""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "PROBABILITIES_AS_LOGITS"

WORDS = 30
TAGS = 12
KINDS = 3
LENGTH = 20
EPOCHS = 4
BATCH = 64


def make_data(n, table, gen):
    words = torch.randint(0, WORDS, (n, LENGTH), generator=gen)
    previous_kind = torch.cat([torch.zeros(n, 1, dtype=torch.long), words[:, :-1] % KINDS], 1)
    tags = table[words, previous_kind]
    return words, tags


class Tagger(nn.Module):
    def __init__(self, *, fixed):
        super().__init__()
        self.fixed = fixed
        self.embed = nn.Embedding(WORDS, 24)
        self.lstm = nn.LSTM(24, 48, batch_first=True)
        self.out = nn.Linear(48, TAGS)

    def forward(self, words):
        hidden, _ = self.lstm(self.embed(words))
        if self.fixed:
            return F.log_softmax(self.out(hidden), dim=-1)   # fix: log-probabilities
        return F.softmax(self.out(hidden), dim=-1)           # bug: probabilities into NLLLoss


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    # half the words have one tag whatever comes before; the others depend on the previous kind
    table = torch.randint(0, TAGS, (WORDS, 1), generator=gen).repeat(1, KINDS)
    ambiguous = torch.randperm(WORDS, generator=gen)[:WORDS // 2]
    table[ambiguous] = torch.randint(0, TAGS, (WORDS // 2, KINDS), generator=gen)
    x_train, y_train = make_data(1024, table, gen)
    x_test, y_test = make_data(256, table, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(2))

    model = Tagger(fixed=fixed)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=3e-3)
    criterion = nn.NLLLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for epoch in range(EPOCHS):
        model.train()
        for words, tags in loader:
            optimizer.zero_grad()
            out = model(words)                                # (N, T, C)
            loss = criterion(out.permute(0, 2, 1), tags)     # NLLLoss wants (N, C, T)
            loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(loss)

    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(-1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
