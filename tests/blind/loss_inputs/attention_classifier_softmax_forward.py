"""Transformer text classifier (token + position embeddings, one encoder layer), ``train_step``
function, AdamW, CrossEntropyLoss.

Synthetic task: a sequence of 16 tokens; its class (one of 10) is the keyword token that occurs twice
(two other keywords occur once each, among noise tokens). The buggy model returns
``self.head(pooled).softmax(dim=-1)`` from its forward ("the model outputs class
probabilities"), and ``train_step`` hands that to ``nn.CrossEntropyLoss``, which applies its own
log-softmax: the loss sees rows that already sum to 1, the logits it works on differ by at most 1,
so its gradients are small and nearly the same for every example. Fix: forward returns the head's
raw scores; softmax only where probabilities are wanted (prediction).

Measured (held-out accuracy, higher is better, without gradhunt): buggy 0.691, fixed 0.910.
"""
import torch
from torch import nn

EXPECTED = "PROBABILITIES_AS_LOGITS"

VOCAB = 40
LENGTH = 16
CLASSES = 10
DIM = 32
STEPS = 250
BATCH = 32


def make_data(n, gen):
    """Noise tokens, the class keyword twice and two other keywords once each."""
    tokens = torch.randint(CLASSES, VOCAB, (n, LENGTH), generator=gen)
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    others = (y[:, None] + torch.randint(1, CLASSES, (n, 2), generator=gen)) % CLASSES
    keywords = torch.cat([y[:, None], y[:, None], others], dim=1)
    where = torch.argsort(torch.rand(n, LENGTH, generator=gen), dim=1)[:, :4]
    tokens.scatter_(1, where, keywords)
    return tokens, y


class TextClassifier(nn.Module):
    def __init__(self, *, fixed):
        super().__init__()
        self.fixed = fixed
        self.embed = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(0.02 * torch.randn(LENGTH, DIM))
        self.encoder = nn.TransformerEncoderLayer(DIM, nhead=4, dim_feedforward=64,
                                                  dropout=0.0, batch_first=True)
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, tokens):
        hidden = self.encoder(self.embed(tokens) + self.pos)
        scores = self.head(hidden.mean(dim=1))
        if self.fixed:
            return scores                       # fix: logits, the loss does the softmax
        return scores.softmax(dim=-1)           # bug: probabilities into CrossEntropyLoss


def train_step(model, optimizer, criterion, tokens, labels):
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss = criterion(model(tokens), labels)
    loss.backward()
    optimizer.step()
    return loss


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    x_train, y_train = make_data(2048, gen)
    x_test, y_test = make_data(512, gen)

    model = TextClassifier(fixed=fixed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    criterion = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    batches = torch.Generator().manual_seed(2)
    for _ in range(STEPS):
        idx = torch.randint(0, len(x_train), (BATCH,), generator=batches)
        loss = train_step(model, optimizer, criterion, x_train[idx], y_train[idx])
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
