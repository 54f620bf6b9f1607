"""MLP regressor on skewed tabular features with BatchNorm1d(momentum=0.9), ported from Keras.

The Keras original used ``BatchNormalization(momentum=0.9)``: keep 90% of the running
statistics at each step. The port writes ``nn.BatchNorm1d(h, momentum=0.9)``, which in PyTorch
means the opposite: running = 0.1 * running + 0.9 * batch. After training, the running mean
and variance are those of the last one or two batches of 16 rows (the last batch of the data
has 8 rows), and ``model.eval()`` normalizes the whole test set with them. The features are
log-normal (sensor and price-like), so 16 rows estimate their variance badly. Training loss
looks normal; only the evaluation is off. The fixed twin uses the PyTorch default,
momentum=0.1 (= 1 - 0.9). Plain loop, Adam, batch 16.

Measured (held-out MSE in eval mode, lower is better; the noise alone scores 0.01): buggy
0.366, fixed 0.107.
"""
import torch
from torch import nn

EXPECTED = "BATCHNORM_MOMENTUM_INVERTED"

FEATURES = 12
N_TRAIN = 1000          # 62 batches of 16 and a last one of 8 per epoch
N_TEST = 1000
EPOCHS = 10
BATCH = 16
KERAS_MOMENTUM = 0.9


def make_data(n, w1, w2, gen):
    x = torch.exp(torch.randn(n, FEATURES, generator=gen))       # log-normal, heavy right tail
    z = ((x - 1.65) / 2.16 @ w1).tanh()                           # standardized inside
    y = z @ w2 + 0.1 * torch.randn(n, generator=gen)
    return x, y


def build_model(*, fixed):
    momentum = 1 - KERAS_MOMENTUM if fixed else KERAS_MOMENTUM    # bug: Keras' meaning kept
    return nn.Sequential(
        nn.Linear(FEATURES, 64), nn.BatchNorm1d(64, momentum=momentum), nn.ReLU(),
        nn.Linear(64, 64), nn.BatchNorm1d(64, momentum=momentum), nn.ReLU(),
        nn.Linear(64, 1),
    )


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    w1 = torch.randn(FEATURES, 16, generator=gen) / FEATURES ** 0.5
    w2 = torch.randn(16, generator=gen) / 4 ** 0.5
    x_train, y_train = make_data(N_TRAIN, w1, w2, gen)
    x_test, y_test = make_data(N_TEST, w1, w2, gen)

    model = build_model(fixed=fixed)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.MSELoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    order_gen = torch.Generator().manual_seed(2)
    for epoch in range(EPOCHS):
        model.train()
        order = torch.randperm(N_TRAIN, generator=order_gen)
        for start in range(0, N_TRAIN, BATCH):
            idx = order[start:start + BATCH]
            optimizer.zero_grad()
            loss = loss_fn(model(x_train[idx]).squeeze(1), y_train[idx])
            loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(loss)

    model.eval()
    with torch.no_grad():
        mse = loss_fn(model(x_test).squeeze(1), y_test).item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": mse, "higher_is_better": False}
