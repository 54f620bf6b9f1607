"""An LSTM classifier hit by a one-off hardware fault: one activation corrupted once, to NaN.

Bug: a flaky device corrupts one value of the input projection's output on its 61st training
call only (its exponent bits flipped to all ones: the value becomes NaN). That batch's loss is
NaN, gradient clipping cannot clip a NaN, and Adam writes NaN into every weight; running the
same batch again is clean, so the fault cannot be reproduced afterwards. Modelled by a wrapper module that counts its calls in training mode.
Fixed: the same program on a healthy device (the wrapper never corrupts).
Idiom: a plain loop over random mini-batches drawn with ``torch.randint``,
``clip_grad_norm_(1.0)``, Adam, no scheduler.
"""
import torch
from torch import nn

from tests.blind.step_guard._common import execute

KIND = "transient"
BAD_STEPS = frozenset({60})
HIGHER_IS_BETTER = True
TOLERANCE = 0.05          # held-out accuracy, absolute
FAULT_CALL = 61
STEPS, BATCH, T = 260, 32, 24


class FlakyLinear(nn.Module):
    """A linear layer on a device that corrupts one output value on its ``fault_call``-th call."""

    def __init__(self, inner, fault_call):
        super().__init__()
        self.inner, self.fault_call, self.calls = inner, fault_call, 0

    def forward(self, x):
        out = self.inner(x)
        if self.training:
            self.calls += 1
            if self.calls == self.fault_call:
                out = out.clone()
                out.view(-1)[5] = float("nan")
        return out


class FrequencyClassifier(nn.Module):
    def __init__(self, fault_call):
        super().__init__()
        self.proj = FlakyLinear(nn.Linear(2, 16), fault_call)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        out, _ = self.lstm(torch.tanh(self.proj(x)))
        return self.head(out[:, -1])


def _waves(n, g):
    y = torch.randint(0, 4, (n,), generator=g)
    t = torch.arange(T).float()
    freq = (0.15 + 0.12 * y.float())[:, None]
    phase = torch.rand(n, 1, generator=g) * 6.28
    signal = torch.sin(freq * t + phase)
    x = torch.stack([signal + 0.2 * torch.randn(n, T, generator=g),
                     torch.cos(freq * t + phase)], dim=-1)
    return x, y


def run(fixed, *, guard=None, guard_replay=False, **reference):
    g = torch.Generator().manual_seed(17)
    x, y = _waves(1400, g)
    xtr, ytr, xte, yte = x[:1000], y[:1000], x[1000:], y[1000:]
    torch.manual_seed(0)
    model = FrequencyClassifier(fault_call=None if fixed else FAULT_CALL)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    loss_fn = nn.CrossEntropyLoss()
    draws = torch.Generator().manual_seed(9)

    def train(control):
        model.train()
        for _ in range(STEPS):
            idx = torch.randint(0, len(xtr), (BATCH,), generator=draws)
            optimizer.zero_grad()
            loss = loss_fn(model(xtr[idx]), ytr[idx])
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            control.step(optimizer, loss)

    def evaluate():
        model.eval()
        return (model(xte).argmax(1) == yte).float().mean()

    return execute(model, optimizer, train, evaluate, guard=guard, guard_replay=guard_replay,
                   **reference)
