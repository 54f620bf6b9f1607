"""1-D CNN on sensor signals: a frozen pretrained stem shared by an old and a new task branch.

A 1-D CNN (``stem``: Conv1d-BatchNorm1d-ReLU x2; ``branch_a``: pool + Linear) is first trained
to classify vibration signals from machine type A. Then a new task arrives, fault type B on a
louder machine (signals with 3x the amplitude and a DC offset). The user freezes only part of
the network, the stem and branch A, with ``requires_grad_(False)`` on each of their parameters,
and trains a new ``branch_b`` (its own Conv1d-BatchNorm1d, trainable) through a ``train_step``
function with AdamW on small batches of 8. The bug: the frozen stem's BatchNorm1d layers are in
train mode with the rest, so the new machine's batches overwrite their running statistics; in
eval mode branch A now sees features normalized with machine B's statistics and the old task
breaks. The fix: the frozen stem's BatchNorm layers are replaced by a ``FrozenBatchNorm1d``
(fixed affine from the pretrained statistics, as in detectron2/torchvision), done in the same
line that freezes the stem; branch B's own BatchNorm keeps training, as it should.

Metric: mean held-out accuracy of task A (machine A) and task B (machine B), eval mode.
Measured: buggy 0.617 (A 0.266, B 0.968), fixed 0.971 (A 0.974, B 0.968).
"""
import torch
from torch import nn

EXPECTED = "FROZEN_BATCHNORM_DRIFTS"

CLASSES = 4
LENGTH = 48
PRETRAIN_STEPS = 150
STEPS = 160
BATCH = 8


class FrozenBatchNorm1d(nn.Module):
    """BatchNorm1d with statistics and affine fixed as buffers: identical in train and eval."""

    def __init__(self, bn: nn.BatchNorm1d):
        super().__init__()
        scale = bn.weight.detach() / torch.sqrt(bn.running_var + bn.eps)
        self.register_buffer("scale", scale.clone())
        self.register_buffer("shift", (bn.bias.detach() - bn.running_mean * scale).clone())

    def forward(self, x):
        return x * self.scale[:, None] + self.shift[:, None]


def freeze_batchnorm(module: nn.Module) -> None:
    for name, child in module.named_children():
        if isinstance(child, nn.BatchNorm1d):
            setattr(module, name, FrozenBatchNorm1d(child))
        else:
            freeze_batchnorm(child)


def conv_bn(c_in, c_out):
    return [nn.Conv1d(c_in, c_out, 5, padding=2, bias=False), nn.BatchNorm1d(c_out), nn.ReLU()]


class SignalNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(*conv_bn(1, 16), nn.MaxPool1d(2), *conv_bn(16, 16))
        self.branch_a = nn.Sequential(nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, CLASSES))
        self.branch_b = nn.Sequential(*conv_bn(16, 16), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                                      nn.Linear(16, CLASSES))

    def forward(self, x):
        z = self.stem(x)
        return self.branch_a(z), self.branch_b(z)


def signals(n, freqs, gen, *, gain=1.0, offset=0.0):
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    t = torch.arange(LENGTH, dtype=torch.float32)
    phase = torch.rand(n, 1, generator=gen) * 6.283
    x = torch.sin(freqs[y][:, None] * t + phase) + 0.8 * torch.randn(n, LENGTH, generator=gen)
    return (x * gain + offset)[:, None, :], y


def train_step(model, optimizer, xb, yb, output):
    model.train()
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(xb)[output], yb)
    loss.backward()
    optimizer.step()
    return loss


def accuracy(model, x, y, output):
    model.eval()
    with torch.no_grad():
        return (model(x)[output].argmax(1) == y).float().mean().item()


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(7)
    freqs_a = torch.tensor([0.3, 0.6, 0.9, 1.2])
    freqs_b = torch.tensor([0.45, 0.75, 1.05, 1.35])
    xa, ya = signals(1500, freqs_a, gen)
    xa_test, ya_test = signals(500, freqs_a, gen)
    xb, yb = signals(600, freqs_b, gen, gain=3.0, offset=2.0)
    xb_test, yb_test = signals(500, freqs_b, gen, gain=3.0, offset=2.0)

    # stage 1: pretraining stem + branch A (no gradhunt)
    model = SignalNet()
    pre_opt = torch.optim.Adam(list(model.stem.parameters()) + list(model.branch_a.parameters()),
                               lr=3e-3)
    for step in range(PRETRAIN_STEPS):
        idx = torch.randint(0, len(xa), (64,), generator=gen)
        train_step(model, pre_opt, xa[idx], ya[idx], 0)

    # stage 2: freeze part of the network, train the new branch
    for p in model.stem.parameters():
        p.requires_grad_(False)
    for p in model.branch_a.parameters():
        p.requires_grad_(False)
    if fixed:
        freeze_batchnorm(model.stem)     # fix: the frozen stem's BatchNorm cannot drift
    optimizer = torch.optim.AdamW(model.branch_b.parameters(), lr=3e-3, weight_decay=1e-2)
    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)
    for step in range(STEPS):
        idx = torch.randint(0, len(xb), (BATCH,), generator=gen)
        loss = train_step(model, optimizer, xb[idx], yb[idx], 1)
        if mon is not None:
            mon.step(loss)

    acc_a = accuracy(model, xa_test, ya_test, 0)
    acc_b = accuracy(model, xb_test, yb_test, 1)
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": (acc_a + acc_b) / 2, "higher_is_better": True,
            "acc_a": acc_a, "acc_b": acc_b}
