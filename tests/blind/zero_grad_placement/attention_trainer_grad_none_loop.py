"""Attention classifier over token sequences, a small Trainer class, AdamW, 12 micro-batches of 2.

Each sequence of 16 tokens hides up to three "signal" tokens among random filler; the class is the
group (one of 4) that the signal tokens come from. The model is token + position embeddings, one
``nn.TransformerEncoderLayer`` and a mean-pooled linear head. The Trainer accumulates
``accum_steps = 12`` micro-batches of 2 sequences per optimizer step (effective batch 24) and
clips the accumulated gradient before stepping. Its buggy ``fit`` clears the gradients with its
own helper (``for p in model.parameters(): p.grad = None``) at the top of every micro-batch, so
each AdamW step sees one micro-batch of 2 sequences: the model learns from 1/12 of the data it
reads. The fixed twin calls the same helper once per window, right after ``optimizer.step()``.

Measured (held-out accuracy, higher is better): buggy 0.520, fixed 0.881 (chance 0.25), after
40 optimizer steps.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "ACCUMULATION_DISCARDED"

VOCAB = 64             # tokens 0..15 are signal (4 groups of 4), 16..63 filler
GROUPS = 4
SEQ_LEN = 16
N_TRAIN = 960
N_TEST = 512
MICRO_BATCH = 2
ACCUM = 12             # 480 micro-batches -> 40 optimizer steps
EPOCHS = 1
LR = 5e-3


def make_data(n, gen):
    y = torch.randint(0, GROUPS, (n,), generator=gen)
    x = torch.randint(16, VOCAB, (n, SEQ_LEN), generator=gen)
    for _ in range(3):
        pos = torch.randint(0, SEQ_LEN, (n,), generator=gen)
        token = y * 4 + torch.randint(0, 4, (n,), generator=gen)
        keep = torch.rand(n, generator=gen) < 0.7
        x[torch.arange(n)[keep], pos[keep]] = token[keep]
    return x, y


class AttentionClassifier(nn.Module):
    def __init__(self, d_model=32):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, d_model)
        self.positions = nn.Parameter(torch.randn(SEQ_LEN, d_model) * 0.02)
        self.encoder = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=64,
                                                  dropout=0.0, batch_first=True)
        self.head = nn.Linear(d_model, GROUPS)

    def forward(self, tokens):
        h = self.encoder(self.tokens(tokens) + self.positions)
        return self.head(h.mean(1))


class Trainer:
    """Gradient accumulation over ``accum_steps`` micro-batches, clipping, AdamW."""

    def __init__(self, model, optimizer, *, accum_steps, clear_every_micro_batch, monitor=None):
        self.model = model
        self.optimizer = optimizer
        self.accum_steps = accum_steps
        self.clear_every_micro_batch = clear_every_micro_batch
        self.monitor = monitor
        self.loss_fn = nn.CrossEntropyLoss()

    def _clear_grads(self):
        for p in self.model.parameters():
            p.grad = None

    def fit(self, loader, *, epochs):
        self._clear_grads()
        for _ in range(epochs):
            self.model.train()
            for i, (tokens, labels) in enumerate(loader):
                if self.clear_every_micro_batch:
                    self._clear_grads()           # bug: wipes the window every micro-batch
                loss = self.loss_fn(self.model(tokens), labels) / self.accum_steps
                loss.backward()
                if (i + 1) % self.accum_steps == 0:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=1.0)
                    self.optimizer.step()
                    if not self.clear_every_micro_batch:
                        self._clear_grads()       # fix: once per window, after the step
                    if self.monitor is not None:
                        self.monitor.step(loss * self.accum_steps)

    @torch.no_grad()
    def accuracy(self, x, y):
        self.model.eval()
        return (self.model(x).argmax(1) == y).float().mean().item()


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(31)
    x_train, y_train = make_data(N_TRAIN, gen)
    x_test, y_test = make_data(N_TEST, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=MICRO_BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(32))

    model = AttentionClassifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    trainer = Trainer(model, optimizer, accum_steps=ACCUM, clear_every_micro_batch=not fixed,
                      monitor=mon)
    trainer.fit(loader, epochs=EPOCHS)
    accuracy = trainer.accuracy(x_test, y_test)
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
