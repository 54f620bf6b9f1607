"""Self-attention token classifier, AdamW, a Hugging Face-style linear warm-up + decay per epoch.

``linear_schedule_with_warmup`` is written the way ``transformers.get_linear_schedule_with_warmup``
is: a LambdaLR over *optimizer steps*, 200 warm-up steps out of 12 epochs x 40 batches = 480,
then a linear decay to 0. The loop is a ``train_one_epoch`` function, and the buggy caller steps
the scheduler after each epoch, next to where an epoch-based scheduler would go: the warm-up
counts 12 of its 200 steps, so the rate is 0 for the whole first epoch and never above 5.5% of
its peak. The fixed twin hands ``train_one_epoch`` the scheduler, which steps it after every
optimizer step.

Measured (held-out accuracy, higher is better): buggy 0.791, fixed 1.000.
"""
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "LR_WARMUP_NEVER_ENDS"

VOCAB = 32
SEQ = 16
CLASSES = 3
MARKS = 7
N_TRAIN = 1280         # 40 batches of 32 per epoch
N_TEST = 512
EPOCHS = 12
WARMUP_STEPS = 200


def make_data(n, gen):
    """Class: which of the tokens 1, 2, 3 occurs most often among the sequence's marks."""
    x = torch.randint(4, VOCAB, (n, SEQ), generator=gen)
    marks = torch.randint(1, 4, (n, MARKS), generator=gen)
    pos = torch.argsort(torch.rand(n, SEQ, generator=gen), dim=1)[:, :MARKS]
    x.scatter_(1, pos, marks)
    counts = torch.stack([(x == t).sum(1) for t in (1, 2, 3)], dim=1)
    return x, counts.argmax(1)


class SelfAttentionClassifier(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, CLASSES))

    def forward(self, tokens):
        h = self.embed(tokens)
        scores = self.q(h) @ self.k(h).transpose(1, 2) / math.sqrt(h.shape[-1])
        h = self.norm(h + self.out(scores.softmax(-1) @ self.v(h)))
        return self.head(h.mean(1))


def linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(step):
        if step < num_warmup_steps:
            return step / max(1, num_warmup_steps)
        return max(0.0, (num_training_steps - step) / max(1, num_training_steps - num_warmup_steps))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


def train_one_epoch(model, loader, optimizer, loss_fn, scheduler=None, mon=None):
    model.train()
    for tokens, labels in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(tokens), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        if mon is not None:
            mon.step(loss)


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    x_train, y_train = make_data(N_TRAIN, gen)
    x_test, y_test = make_data(N_TEST, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(2))

    model = SelfAttentionClassifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    scheduler = linear_schedule_with_warmup(optimizer, WARMUP_STEPS, EPOCHS * len(loader))
    loss_fn = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for epoch in range(EPOCHS):
        if fixed:
            train_one_epoch(model, loader, optimizer, loss_fn, scheduler, mon)  # fix: per step
        else:
            train_one_epoch(model, loader, optimizer, loss_fn, mon=mon)
            scheduler.step()            # bug: a schedule in optimizer steps stepped per epoch

    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
