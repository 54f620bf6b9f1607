"""A BatchNorm MLP regressor of parcel weights in kg where one label was recorded in milligrams.

Bug: one parcel's weight is 3.2e6 (mg) among labels of 0.5-6 kg. Its batch's MSE gradient is
about 1e5 times the usual; SGD with momentum applies it and the head's weights jump so far that
the run never recovers (the momentum keeps pushing for tens of steps). The loss stays finite and
the loop keeps printing. Mixed precision: bf16 autocast with a ``torch.amp.GradScaler("cpu")``
kept from an fp16 recipe; the spike is finite in bf16, so the scaler does not skip it.
Fixed: the label converted to kg (3.2).
Idiom: a ``Trainer`` class with ``fit``/``training_step``/``evaluate`` methods.
"""
import torch
from torch import nn

from tests.blind.step_guard._common import execute

KIND = "spike"
BAD_STEPS = frozenset({25, 36, 90})
HIGHER_IS_BETTER = False
TOLERANCE = 0.25          # held-out MSE, relative
BAD_ROW = 1333
EPOCHS, BATCH = 3, 64


def _parcels(fixed):
    g = torch.Generator().manual_seed(8)
    n = 2400
    x = torch.randn(n, 10, generator=g) * torch.linspace(1, 20, 10) + torch.linspace(0, 100, 10)
    z = (x - torch.linspace(0, 100, 10)) / torch.linspace(1, 20, 10)
    kg = 3.0 + 0.8 * torch.tanh(z[:, :4] @ torch.tensor([0.8, -0.5, 0.6, 0.4])) \
        + 0.4 * z[:, 4] * z[:, 5].sign() * 0.5 + 0.05 * torch.randn(n, generator=g)
    kg = kg.clamp(0.5, 6.0)
    kg[BAD_ROW] = 3.2 if fixed else 3.2e6
    return x[:2000], kg[:2000], x[2000:], kg[2000:]


class Trainer:
    def __init__(self, model, optimizer, scaler):
        self.model, self.optimizer, self.scaler = model, optimizer, scaler
        self.loss_fn = nn.MSELoss()

    def training_step(self, xb, yb):
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pred = self.model(xb).squeeze(-1)
        loss = self.loss_fn(pred.float(), yb)
        self.scaler.scale(loss).backward()
        return loss

    def fit(self, x, y, control, *, epochs, batch_size, seed):
        g = torch.Generator().manual_seed(seed)
        self.model.train()
        for _ in range(epochs):
            perm = torch.randperm(len(x), generator=g)
            for i in range(0, len(x) - batch_size + 1, batch_size):
                idx = perm[i:i + batch_size]
                loss = self.training_step(x[idx], y[idx])
                control.step(self.optimizer, loss, scaler=self.scaler)

    def evaluate(self, x, y):
        self.model.eval()
        return self.loss_fn(self.model(x).squeeze(-1), y)


def run(fixed, *, guard=None, guard_replay=False, **reference):
    xtr, ytr, xte, yte = _parcels(fixed)
    torch.manual_seed(0)
    model = nn.Sequential(nn.BatchNorm1d(10), nn.Linear(10, 64), nn.ReLU(), nn.BatchNorm1d(64),
                          nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu")
    trainer = Trainer(model, optimizer, scaler)
    return execute(
        model, optimizer,
        lambda control: trainer.fit(xtr, ytr, control, epochs=EPOCHS, batch_size=BATCH, seed=4),
        lambda: trainer.evaluate(xte, yte), guard=guard, guard_replay=guard_replay,
        monitor_kwargs={"scaler": scaler}, **reference)
