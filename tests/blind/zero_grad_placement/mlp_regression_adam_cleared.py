"""MLP regression with BatchNorm on tabular data, plain loop, Adam, ``zero_grad()`` before step.

Eight standardized features, a smooth nonlinear target plus noise. The loop was reordered while
adding a gradient-norm print and now reads ``loss.backward(); optimizer.zero_grad();
optimizer.step()``: ``zero_grad()`` sets every ``.grad`` to None (its default), Adam skips
parameters without a gradient, and the weights never move; only BatchNorm's running statistics
change. The fixed twin calls ``optimizer.zero_grad()`` before ``loss.backward()``.

Measured (held-out mean squared error, lower is better; the target's variance is 1.82): buggy 1.813,
fixed 0.166.
"""
import torch
from torch import nn

EXPECTED = "GRADIENTS_CLEARED_BEFORE_STEP"

FEATURES = 8
N_TRAIN = 2048
N_TEST = 512
BATCH = 64
STEPS = 300


def make_data(n, w, gen):
    x = torch.randn(n, FEATURES, generator=gen)
    y = torch.sin(x @ w[:, 0]) + 0.5 * (x @ w[:, 1]) ** 2 / FEATURES + x[:, 0] * x[:, 1]
    return x, (y + 0.1 * torch.randn(n, generator=gen)).unsqueeze(1)


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(41)
    w = torch.randn(FEATURES, 2, generator=gen)
    x_train, y_train = make_data(N_TRAIN, w, gen)
    x_test, y_test = make_data(N_TEST, w, gen)

    model = nn.Sequential(
        nn.Linear(FEATURES, 64), nn.BatchNorm1d(64), nn.ReLU(),
        nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(),
        nn.Linear(64, 1),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    mse = nn.MSELoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for step in range(STEPS):
        idx = torch.randint(0, N_TRAIN, (BATCH,), generator=gen)
        if fixed:
            optimizer.zero_grad()         # fix: clear before the backward
        loss = mse(model(x_train[idx]), y_train[idx])
        loss.backward()
        if not fixed:
            optimizer.zero_grad()         # bug: clears the gradient backward just computed
        optimizer.step()
        if mon is not None:
            mon.step(loss)

    model.eval()
    with torch.no_grad():
        test_mse = mse(model(x_test), y_test).item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": test_mse, "higher_is_better": False}
