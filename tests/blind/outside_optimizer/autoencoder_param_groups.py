"""MLP autoencoder with BatchNorm on sensor readings, epochs over shuffled batches, SGD + momentum.

Readings of 24 correlated sensors (a 4-factor signal plus noise) are compressed to a 4-unit code
and reconstructed. The optimizer is built from a list of parameter groups, one per part, so the
encoder can take weight decay and the code layer none. The buggy list has a group for the
encoder and one for the bottleneck, and forgets the decoder: the decoder gets a gradient every
step and stays at its random init, so reconstructions can only lie on a random surface. The loop
clears with ``model.zero_grad()``. The fixed twin adds the decoder's group.

Measured (held-out reconstruction MSE of the standardized readings, lower is better):
buggy 0.87, fixed 0.049.
"""
import torch
from torch import nn

EXPECTED = "PARAMS_NOT_IN_OPTIMIZER"

SENSORS = 24
FACTORS = 4
EPOCHS = 12
BATCH = 128


def make_readings(n, mixing, gen):
    factors = torch.randn(n, FACTORS, generator=gen)
    x = torch.tanh(factors @ mixing) + 0.1 * torch.randn(n, SENSORS, generator=gen)
    return x


class Autoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(SENSORS, 64), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(),
        )
        self.bottleneck = nn.Linear(32, FACTORS)
        self.decoder = nn.Sequential(
            nn.Linear(FACTORS, 32), nn.BatchNorm1d(32), nn.ReLU(),
            nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Linear(64, SENSORS),
        )

    def forward(self, x):
        return self.decoder(self.bottleneck(self.encoder(x)))


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(5)
    mixing = 0.8 * torch.randn(FACTORS, SENSORS, generator=gen)
    x_train = make_readings(4096, mixing, gen)
    x_test = make_readings(1024, mixing, gen)
    mean, std = x_train.mean(0), x_train.std(0)
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std

    model = Autoencoder()
    groups = [
        {"params": model.encoder.parameters(), "weight_decay": 1e-4},
        {"params": model.bottleneck.parameters(), "weight_decay": 0.0},
    ]
    if fixed:
        groups.append({"params": model.decoder.parameters(), "weight_decay": 1e-4})  # fix
    # bug (buggy twin): no group for model.decoder
    optimizer = torch.optim.SGD(groups, lr=0.05, momentum=0.9)
    loss_fn = nn.MSELoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for epoch in range(EPOCHS):
        model.train()
        order = torch.randperm(len(x_train), generator=gen)
        for start in range(0, len(order), BATCH):
            xb = x_train[order[start:start + BATCH]]
            model.zero_grad()
            loss = loss_fn(model(xb), xb)
            loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(loss)

    model.eval()
    with torch.no_grad():
        error = loss_fn(model(x_test), x_test).item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": error, "higher_is_better": False}
