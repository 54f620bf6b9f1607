"""GRU sequence classifier, a ``train_step`` function per micro-batch, plain SGD, 16 of 2.

The task: which of 4 classes produced a sequence of noisy 3-d readings around a class mean (the
GRU has to average over time)? Each micro-batch holds 2 sequences; the training script wants
gradients accumulated over ``ACCUM = 16`` micro-batches (an effective batch of 32) with each
loss divided by 16, and calls ``optimizer.step()`` from the driver loop every 16th micro-batch.
The buggy ``train_step`` starts with ``model.zero_grad()``, as most single-batch train_step
functions do, so it wipes the window at every micro-batch: each step applies the gradient of 2
sequences at 1/16 of its intended size. The fixed twin calls ``model.zero_grad()`` in the
driver, right after ``optimizer.step()``.

Measured (held-out accuracy, higher is better): buggy 0.578, fixed 0.826 (chance 0.25), after
50 optimizer steps.
"""
import torch
from torch import nn

EXPECTED = "ACCUMULATION_DISCARDED"

SEQ_LEN = 8
CLASSES = 4
FEATURES = 3
MICRO_BATCH = 2
ACCUM = 16
OPT_STEPS = 50
N_TEST = 512
LR = 0.3


def make_data(n, means, gen):
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    x = means[y].unsqueeze(1) + 1.5 * torch.randn(n, SEQ_LEN, FEATURES, generator=gen)
    return x, y


class GRUClassifier(nn.Module):
    def __init__(self, hidden=24):
        super().__init__()
        self.gru = nn.GRU(FEATURES, hidden, batch_first=True)
        self.out = nn.Linear(hidden, CLASSES)

    def forward(self, x):
        _, h = self.gru(x)
        return self.out(h[-1])


def train_step(model, batch, loss_fn, *, accum, clear_first):
    """Forward and backward of one micro-batch; the caller decides when to step."""
    if clear_first:
        model.zero_grad()                 # bug: runs for every micro-batch of the window
    x, y = batch
    loss = loss_fn(model(x), y) / accum
    loss.backward()
    return loss


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(21)
    means = torch.randn(CLASSES, FEATURES, generator=gen)
    x_test, y_test = make_data(N_TEST, means, gen)

    model = GRUClassifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    model.zero_grad()
    for step in range(OPT_STEPS):
        window_loss = 0.0
        for _ in range(ACCUM):
            batch = make_data(MICRO_BATCH, means, gen)
            loss = train_step(model, batch, loss_fn, accum=ACCUM, clear_first=not fixed)
            window_loss = window_loss + loss
        optimizer.step()
        if fixed:
            model.zero_grad()             # fix: clear once per window, after the step
        if mon is not None:
            mon.step(window_loss)

    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
