"""HEALTHY: a small GRU language model whose output projection is tied to its embedding.

Deliberate weight sharing (Press & Wolf 2017, as in GPT-2 and AWD-LSTM):
``self.lm_head.weight = self.embed.weight``: one Parameter under two names, on purpose, so the
model has one vocabulary matrix for reading and for scoring. Not MODULE_REUSED: nothing here
was meant to be two independent copies. Trained on sequences from a fixed random bigram
process, a plain loop, AdamW, batch 32. Must raise no warning or error.

Measured: held-out per-token cross-entropy 1.830 nats (the bigram process' own entropy
scores 1.683, a uniform guess ln 24 = 3.18).
"""
import torch
from torch import nn
from torch.nn import functional as F

VOCAB = 24
DIM = 32
LENGTH = 16
STEPS = 150
BATCH = 32


def make_sequences(n, transition, gen):
    tokens = torch.empty(n, LENGTH + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, VOCAB, (n,), generator=gen)
    for t in range(LENGTH):
        tokens[:, t + 1] = torch.multinomial(transition[tokens[:, t]], 1, generator=gen)[:, 0]
    return tokens


class TiedGRULM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.rnn = nn.GRU(DIM, DIM, batch_first=True)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        self.lm_head.weight = self.embed.weight          # weight tying, on purpose

    def forward(self, tokens):
        hidden, _ = self.rnn(self.embed(tokens))
        return self.lm_head(hidden)


def run(*, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    transition = torch.softmax(2.5 * torch.randn(VOCAB, VOCAB, generator=gen), dim=1)
    train = make_sequences(2048, transition, gen)
    test = make_sequences(512, transition, gen)

    model = TiedGRULM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    batch_gen = torch.Generator().manual_seed(2)
    for _ in range(STEPS):
        batch = train[torch.randint(0, len(train), (BATCH,), generator=batch_gen)]
        optimizer.zero_grad()
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        if mon is not None:
            mon.step(loss)

    model.eval()
    with torch.no_grad():
        logits = model(test[:, :-1])
        ce = F.cross_entropy(logits.reshape(-1, VOCAB), test[:, 1:].reshape(-1)).item()
        entropy = -(transition * transition.log()).sum(1).mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": ce, "higher_is_better": False, "entropy": entropy}
