"""HEALTHY: an MLP regressor with LayerNorm trained by two optimizers, Muon and AdamW, split.

Muon only takes 2-D hidden weight matrices, so the usual recipe (as in the modded-nanoGPT
speedruns) gives the hidden ``Linear`` weights to ``torch.optim.Muon`` and the input layer, the
output layer, the biases and the LayerNorms to ``AdamW``. The loop clears and steps both every
batch, in a ``train_step`` function. The Monitor is given one of them (Muon, which holds the most
parameters), as its single ``optimizer=`` asks. Every parameter is held by an optimizer that
steps: nothing here is a bug.

Measured (held-out MSE of a standardized target; predicting the mean scores 1.0): 0.009.
"""
import torch
from torch import nn

EXPECTED = None


class Regressor(nn.Module):
    def __init__(self, inputs=12, width=64):
        super().__init__()
        self.input = nn.Linear(inputs, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width), nn.GELU())
            for _ in range(3))
        self.output = nn.Linear(width, 1)

    def forward(self, x):
        h = self.input(x)
        for block in self.blocks:
            h = h + block(h)
        return self.output(h).squeeze(1)


def split_optimizers(model):
    hidden = [p for name, p in model.named_parameters()
              if name.startswith("blocks.") and p.dim() == 2]
    hidden_ids = {id(p) for p in hidden}
    rest = [p for p in model.parameters() if id(p) not in hidden_ids]
    return (torch.optim.Muon(hidden, lr=0.02, momentum=0.95),
            torch.optim.AdamW(rest, lr=3e-3, weight_decay=0.01))


def train_step(model, optimizers, loss_fn, x, y):
    for optimizer in optimizers:
        optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    for optimizer in optimizers:
        optimizer.step()
    return loss


def run(*, fixed: bool = True, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(23)
    w1 = torch.randn(12, 24, generator=gen)
    w2 = torch.randn(24, generator=gen)

    def make(n):
        x = torch.randn(n, 12, generator=gen)
        return x, torch.tanh(x @ w1 / 12 ** 0.5) @ w2 + 0.1 * torch.randn(n, generator=gen)

    x_train, y_train = make(4096)
    x_test, y_test = make(1024)
    mean, std = y_train.mean(), y_train.std()
    y_train, y_test = (y_train - mean) / std, (y_test - mean) / std

    model = Regressor()
    muon, adamw = split_optimizers(model)
    loss_fn = nn.MSELoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=muon)
    model.train()
    for _ in range(300):
        idx = torch.randint(0, len(x_train), (128,), generator=gen)
        loss = train_step(model, (muon, adamw), loss_fn, x_train[idx], y_train[idx])
        if mon is not None:
            mon.step(loss)

    model.eval()
    with torch.no_grad():
        error = loss_fn(model(x_test), y_test).item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": error, "higher_is_better": False}
