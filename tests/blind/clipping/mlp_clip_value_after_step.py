"""Deep LayerNorm MLP regressor, SGD + momentum at lr 0.2, clip_grad_value_(0.05) after the step.

A 5-hidden-layer MLP (width 64, LayerNorm + GELU) fits a smooth nonlinear function of 12
features. The training step lives in a ``train_step`` function; the buggy one calls
``clip_grad_value_(model.parameters(), 0.05)`` after ``optimizer.step()``: it clips gradients
that were already applied and are cleared by the next ``zero_grad()``. At lr 0.2 with momentum
0.9 the unclipped steps diverge and the weights go NaN. The fixed twin clips between
``loss.backward()`` and ``optimizer.step()``.

Measured without gradhunt (held-out MSE, lower is better; the target's variance is 2.14; a NaN
model is scored as the cap 1000): buggy NaN -> 1000, fixed 0.073.
"""
import math

import torch
from torch import nn

EXPECTED = "CLIP_HAS_NO_EFFECT"

FEATURES = 12
DEPTH = 5
WIDTH = 64
STEPS = 300
BATCH = 64
LR = 0.2
CLIP_VALUE = 0.05
ERROR_CAP = 1000.0


def make_data(n, w, gen):
    x = torch.randn(n, FEATURES, generator=gen)
    y = 2 * torch.sin(x @ w[:, 0]) + (x @ w[:, 1]) ** 2 / 4
    return x, y + 0.1 * torch.randn(n, generator=gen)


def build_model():
    layers, width_in = [], FEATURES
    for _ in range(DEPTH):
        layers += [nn.Linear(width_in, WIDTH), nn.LayerNorm(WIDTH), nn.GELU()]
        width_in = WIDTH
    return nn.Sequential(*layers, nn.Linear(WIDTH, 1))


def train_step(model, optimizer, loss_fn, xb, yb, *, fixed):
    optimizer.zero_grad()
    loss = loss_fn(model(xb).squeeze(1), yb)
    loss.backward()
    if fixed:
        nn.utils.clip_grad_value_(model.parameters(), CLIP_VALUE)   # fix: before the step
    optimizer.step()
    if not fixed:
        nn.utils.clip_grad_value_(model.parameters(), CLIP_VALUE)   # bug: after the step
    return loss


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(FEATURES, 2, generator=gen) / FEATURES ** 0.5
    x_train, y_train = make_data(4096, w, gen)
    x_test, y_test = make_data(1024, w, gen)
    batches = torch.Generator().manual_seed(2)

    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    loss_fn = nn.MSELoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    model.train()
    for step in range(STEPS):
        idx = torch.randint(0, len(x_train), (BATCH,), generator=batches)
        loss = train_step(model, optimizer, loss_fn, x_train[idx], y_train[idx], fixed=fixed)
        if mon is not None:
            mon.step(loss)

    model.eval()
    with torch.no_grad():
        mse = loss_fn(model(x_test).squeeze(1), y_test).item()
    if not math.isfinite(mse) or mse > ERROR_CAP:      # NaN or diverged: the cap
        mse = ERROR_CAP
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": mse, "higher_is_better": False}
