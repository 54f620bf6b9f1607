"""MLP regressor with BatchNorm1d behind a timm-style ``model.backbone``, a trainer class, Adam.

A tabular model (``backbone``: Linear-BatchNorm1d-ReLU x2, ``head``: Linear) is first trained
to predict quantity A from 12 sensor readings of plant A. Plant B reports the same readings in
other units (each column rescaled and offset) and wants a second output, quantity B. The user
adds ``head_b``, freezes the backbone and head A with ``for p in ...parameters(): p.requires_grad
= False``, and fine-tunes with a small ``Trainer`` class whose ``fit()`` calls ``model.train()``
each epoch. The bug: the frozen backbone's BatchNorm1d layers are in train mode, so the plant-B
batches overwrite their running statistics; in eval mode the old head A now sees features
normalized with plant B's statistics and its predictions for plant A are far off. The fix: the
model's ``train()`` is overridden to keep a frozen backbone in eval mode (the timm/detectron
idiom, ``freeze_backbone=True``).

Metric: mean of the two held-out MSEs (task A on plant A, task B on plant B, both targets of
unit variance), eval mode; lower is better. Measured: buggy 1.04 (A 1.75, B 0.336),
fixed 0.189 (A 0.0056, B 0.373).
"""
import torch
from torch import nn

EXPECTED = "FROZEN_BATCHNORM_DRIFTS"

FEATURES = 12
PRETRAIN_EPOCHS = 30
EPOCHS = 8
BATCH = 32


class Regressor(nn.Module):
    def __init__(self, *, freeze_backbone_bn: bool):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Linear(FEATURES, 64), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(),
        )
        self.head = nn.Linear(64, 1)
        self.head_b = nn.Linear(64, 1)
        self.freeze_backbone_bn = freeze_backbone_bn

    def train(self, mode: bool = True):
        super().train(mode)
        if mode and self.freeze_backbone_bn:
            self.backbone.eval()      # fix: a frozen backbone keeps its BatchNorm statistics
        return self

    def forward(self, x):
        z = self.backbone(x)
        return self.head(z).squeeze(1), self.head_b(z).squeeze(1)


class Trainer:
    def __init__(self, model, optimizer, *, output, monitor=None):
        self.model, self.optimizer, self.output, self.monitor = model, optimizer, output, monitor
        self.loss_fn = nn.MSELoss()

    def fit(self, x, y, *, epochs, batch_size, gen):
        for epoch in range(epochs):
            self.model.train()
            perm = torch.randperm(len(x), generator=gen)
            for i in range(0, len(x), batch_size):
                idx = perm[i:i + batch_size]
                self.optimizer.zero_grad()
                loss = self.loss_fn(self.model(x[idx])[self.output], y[idx])
                loss.backward()
                self.optimizer.step()
                if self.monitor is not None:
                    self.monitor.step(loss)

    def mse(self, x, y, output):
        self.model.eval()
        with torch.no_grad():
            return nn.functional.mse_loss(self.model(x)[output], y).item()


def plant_data(n, w, gen, *, scale, offset):
    raw = torch.randn(n, FEATURES, generator=gen)
    target = torch.tanh(raw @ w[:, 0]) + 0.5 * torch.sin(raw @ w[:, 1])
    target = (target - target.mean()) / target.std()
    return raw * scale + offset, target


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(5)
    w_a = torch.randn(FEATURES, 2, generator=gen) / FEATURES ** 0.5
    w_b = torch.randn(FEATURES, 2, generator=gen) / FEATURES ** 0.5
    ones, zeros = torch.ones(FEATURES), torch.zeros(FEATURES)
    scale_b = torch.rand(FEATURES, generator=gen) * 4 + 1.0     # other units at plant B
    offset_b = torch.randn(FEATURES, generator=gen) * 3
    xa, ya = plant_data(2000, w_a, gen, scale=ones, offset=zeros)
    xa_test, ya_test = plant_data(1000, w_a, gen, scale=ones, offset=zeros)
    xb, yb = plant_data(800, w_b, gen, scale=scale_b, offset=offset_b)
    xb_test, yb_test = plant_data(1000, w_b, gen, scale=scale_b, offset=offset_b)

    # stage 1: the pretrained model (no gradhunt)
    model = Regressor(freeze_backbone_bn=fixed)
    pre = Trainer(model, torch.optim.Adam(list(model.backbone.parameters())
                                          + list(model.head.parameters()), lr=3e-3), output=0)
    pre.fit(xa, ya, epochs=PRETRAIN_EPOCHS, batch_size=128, gen=gen)

    # stage 2: frozen backbone and head A, new head for plant B
    for p in list(model.backbone.parameters()) + list(model.head.parameters()):
        p.requires_grad = False
    optimizer = torch.optim.Adam(model.head_b.parameters(), lr=1e-2)
    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)
    trainer = Trainer(model, optimizer, output=1, monitor=mon)
    trainer.fit(xb, yb, epochs=EPOCHS, batch_size=BATCH, gen=gen)

    mse_a = trainer.mse(xa_test, ya_test, 0)
    mse_b = trainer.mse(xb_test, yb_test, 1)
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": (mse_a + mse_b) / 2, "higher_is_better": False,
            "mse_a": mse_a, "mse_b": mse_b}
