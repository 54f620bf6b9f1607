"""GRU encoder-decoder forecaster on noisy multi-sine series, a ``train_step`` function, RMSprop.

The model reads 20 past values with a GRU encoder and rolls a GRUCell decoder forward 8 steps,
feeding back its own forecast. The buggy program builds the optimizer from
``model.encoder.parameters()`` (the author thought of the whole network as "the encoder"), so
the decoder and its output layer get a gradient every step and never move from their random
init; the encoder can only choose the decoder's starting state. ``train_step`` clears with
``model.zero_grad()``. The fixed twin builds the optimizer from ``model.parameters()``.

Measured (held-out forecast MSE, lower is better): buggy 0.78, fixed 0.17.
"""
import torch
from torch import nn

EXPECTED = "PARAMS_NOT_IN_OPTIMIZER"

PAST = 20
HORIZON = 8
STEPS = 150
BATCH = 64


def make_series(n, gen):
    t = torch.arange(PAST + HORIZON).float()
    freq = 0.15 + 0.25 * torch.rand(n, 2, generator=gen)
    phase = 6.283 * torch.rand(n, 2, generator=gen)
    amp = 0.5 + torch.rand(n, 2, generator=gen)
    series = (amp[:, :, None] * torch.sin(freq[:, :, None] * t + phase[:, :, None])).sum(1)
    series = series + 0.05 * torch.randn(series.shape, generator=gen)
    return series[:, :PAST, None], series[:, PAST:]


class Decoder(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.cell = nn.GRUCell(1, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, state, last_value):
        forecasts = []
        value = last_value
        for _ in range(HORIZON):
            state = self.cell(value, state)
            value = self.out(state)
            forecasts.append(value)
        return torch.cat(forecasts, 1)


class Forecaster(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.encoder = nn.GRU(1, hidden, batch_first=True)
        self.decoder = Decoder(hidden)

    def forward(self, past):
        _, state = self.encoder(past)
        return self.decoder(state[0], past[:, -1])


def train_step(model, optimizer, loss_fn, past, future):
    model.zero_grad()
    loss = loss_fn(model(past), future)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(11)
    past_train, future_train = make_series(4096, gen)
    past_test, future_test = make_series(1024, gen)

    model = Forecaster()
    if fixed:
        optimizer = torch.optim.RMSprop(model.parameters(), lr=3e-3)          # fix
    else:
        optimizer = torch.optim.RMSprop(model.encoder.parameters(), lr=3e-3)  # bug
    loss_fn = nn.MSELoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for step in range(STEPS):
        idx = torch.randint(0, len(past_train), (BATCH,), generator=gen)
        loss = train_step(model, optimizer, loss_fn, past_train[idx], future_train[idx])
        if mon is not None:
            mon.step(loss)

    model.eval()
    with torch.no_grad():
        error = loss_fn(model(past_test), future_test).item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": error, "higher_is_better": False}
