"""LSTM frequency classifier on noisy sine waves, SGD + momentum at lr 1.5, clip_grad_norm_(0.25).

A word-language-model style recipe (high SGD rate, tight norm clip) on a sequence task: each
sequence is 40 noisy samples of a sine wave at one of 4 frequencies; an LSTM reads it and a
linear head classifies the mean of its outputs. The buggy loop calls
``clip_grad_norm_(model.parameters(), 0.25)`` right after the forward pass, before
``loss.backward()``: it clips the gradients of the previous step, already cleared by
``zero_grad()``, and the fresh gradients reach ``optimizer.step()`` unclipped. At lr 1.5 with
momentum 0.9 they blow the LSTM up within the first steps and it never recovers. The fixed twin
calls the same clip between ``loss.backward()`` and ``optimizer.step()``.

Measured without gradhunt (held-out accuracy, higher is better; chance 0.25): buggy 0.395,
fixed 1.000.
"""
import math

import torch
from torch import nn

EXPECTED = "CLIP_HAS_NO_EFFECT"

SEQ_LEN = 40
CLASSES = 4
HIDDEN = 32
STEPS = 200
BATCH = 32
LR = 1.5
MAX_NORM = 0.25


def make_data(n, gen):
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    t = torch.arange(SEQ_LEN).float()
    freq = 0.2 + 0.25 * y.float()
    phase = torch.rand(n, generator=gen) * 2 * math.pi
    x = torch.sin(freq[:, None] * t[None, :] + phase[:, None])
    x = x + 0.3 * torch.randn(n, SEQ_LEN, generator=gen)
    return x.unsqueeze(-1), y


class FrequencyClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(1, HIDDEN, batch_first=True)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out.mean(1))


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    x_train, y_train = make_data(2048, gen)
    x_test, y_test = make_data(512, gen)
    batches = torch.Generator().manual_seed(2)

    model = FrequencyClassifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for step in range(STEPS):
        idx = torch.randint(0, len(x_train), (BATCH,), generator=batches)
        optimizer.zero_grad()
        logits = model(x_train[idx])
        loss = criterion(logits, y_train[idx])
        if not fixed:
            nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)   # bug: before backward
        loss.backward()
        if fixed:
            nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)   # fix: after backward
        optimizer.step()
        if mon is not None:
            mon.step(loss)

    model.eval()
    with torch.no_grad():
        logits = model(x_test)
    if torch.isfinite(logits).all():
        accuracy = (logits.argmax(1) == y_test).float().mean().item()
    else:                                  # a NaN model predicts nothing: chance
        accuracy = 1.0 / CLASSES
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
