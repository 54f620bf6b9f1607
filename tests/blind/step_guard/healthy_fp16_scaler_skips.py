"""Healthy: an MLP under fp16 autocast with a ``torch.amp.GradScaler("cpu")`` that skips steps.

The scaler starts at a loss scale that overflows fp16 and grows it every 25 steps; each
overflow is an inf in the scaled gradients, and ``scaler.step`` skips that step itself, then
halves the scale. Those skips are the scaler's normal work: a guard must not count them as its
own skipped steps, and the Monitor must not alarm on them.
Idiom: a plain loop, ``scaler.scale(loss).backward()``, ``scaler.step``, ``scaler.update``, Adam.
"""
import torch
from torch import nn

from tests.blind.step_guard._common import execute

KIND = "healthy"
BAD_STEPS = frozenset()
HIGHER_IS_BETTER = True
BASELINE = 0.7            # held-out accuracy; chance is 0.2
STEPS, BATCH = 200, 64


def run(fixed=True, *, guard=None, guard_replay=False, **reference):
    g = torch.Generator().manual_seed(14)
    x = torch.randn(2000, 20, generator=g)
    y = (x[:, :5] * torch.tensor([1.5, -1.0, 0.5, 1.0, -0.5])).argmax(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 5))
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 24, growth_interval=25)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    scales = []

    def train(control):
        model.train()
        for _ in range(STEPS):
            idx = torch.randint(0, 1600, (BATCH,), generator=g)
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = loss_fn(model(x[idx]), y[idx])
            scaler.scale(loss).backward()
            scales.append(scaler.get_scale())
            control.step(optimizer, loss, scaler=scaler)

    def evaluate():
        model.eval()
        return (model(x[1600:]).argmax(1) == y[1600:]).float().mean()

    out = execute(model, optimizer, train, evaluate, guard=guard, guard_replay=guard_replay,
                  monitor_kwargs={"scaler": scaler}, **reference)
    out["scaler_skips"] = sum(1 for a, b in zip(scales, scales[1:]) if b < a)
    return out
