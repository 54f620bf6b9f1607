"""MLP regressor with BatchNorm, Adam, a linear warm-up of 500 optimizer steps stepped per epoch.

The warm-up is written in optimizer steps, ``LambdaLR(lambda s: min(1, (s + 1) / 500))``, and
is meant to hand over to the full rate after the first ~12 of 20 epochs' worth of batches
(40 batches per epoch, 800 steps). The buggy loop steps it once per epoch, so after 20 epochs
the warm-up has counted 20 of its 500 steps: Adam runs at 0.2%-4% of its peak rate for the
whole run. The fixed twin steps the scheduler after every optimizer step.

Measured (held-out MSE, lower is better; the target's noise alone scores 0.01): buggy
0.163, fixed 0.060.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "LR_WARMUP_NEVER_ENDS"

FEATURES = 16
N_TRAIN = 2560         # 40 batches of 64 per epoch
N_TEST = 1024
EPOCHS = 20
WARMUP_STEPS = 500


def make_data(n, w1, w2, gen):
    x = torch.randn(n, FEATURES, generator=gen) * 3 + 1     # unscaled features: BatchNorm's job
    h = torch.tanh(((x - 1) / 3) @ w1)
    y = h @ w2 + 0.1 * torch.randn(n, generator=gen)
    return x, y


def build_model():
    return nn.Sequential(
        nn.Linear(FEATURES, 128), nn.BatchNorm1d(128), nn.ReLU(),
        nn.Linear(128, 128), nn.BatchNorm1d(128), nn.ReLU(),
        nn.Linear(128, 1),
    )


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    w1 = torch.randn(FEATURES, 32, generator=gen) / FEATURES ** 0.5
    w2 = torch.randn(32, generator=gen) / 32 ** 0.5 * 2
    x_train, y_train = make_data(N_TRAIN, w1, w2, gen)
    x_test, y_test = make_data(N_TEST, w1, w2, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(2))

    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    warmup = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / WARMUP_STEPS))
    loss_fn = nn.MSELoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for epoch in range(EPOCHS):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb).squeeze(1), yb)
            loss.backward()
            optimizer.step()
            if fixed:
                warmup.step()           # fix: the warm-up counts optimizer steps
            if mon is not None:
                mon.step(loss)
        if not fixed:
            warmup.step()               # bug: a warm-up in batches stepped once per epoch

    model.eval()
    with torch.no_grad():
        mse = loss_fn(model(x_test).squeeze(1), y_test).item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": mse, "higher_is_better": False}
