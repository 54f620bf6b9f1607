"""CNN with BatchNorm2d: a pretrained extractor frozen, a second head added for a new camera.

The program first trains a small CNN (conv-BN-ReLU blocks + head) on task A: 10x10 grey images
from the old camera. Then a second task arrives from a new camera whose images are brighter and
higher-contrast (x * 2.5 + 1.5), with its own labels. The user freezes the feature extractor
with ``model.features.requires_grad_(False)`` so that task A keeps working, and trains a new
linear head for task B with SGD in a plain loop that calls ``model.train()`` every epoch. The
bug: ``model.train()`` puts the frozen BatchNorm2d layers in train mode, so every task-B batch
overwrites their running mean and variance with the new camera's statistics; at evaluation
(eval mode) the old head A gets features normalized with the wrong statistics and task A
collapses, although no weight of the extractor changed. The fix: ``model.features.eval()``
right after ``model.train()``, so the frozen extractor stays exactly as it was trained.

Metric: the mean held-out accuracy of task A (old head, old camera) and task B (new head, new
camera), eval mode. Measured: buggy 0.588 (task A 0.512, task B 0.664), fixed 0.817 (task A
0.984, task B 0.650).
"""
import torch
from torch import nn

EXPECTED = "FROZEN_BATCHNORM_DRIFTS"

CLASSES = 5
PRETRAIN_STEPS = 150
EPOCHS = 6
BATCH = 16


def make_images(n, templates, gen, *, gain=1.0, offset=0.0):
    y = torch.randint(0, len(templates), (n,), generator=gen)
    x = templates[y] + 0.9 * torch.randn(n, 1, 10, 10, generator=gen)
    return x * gain + offset, y


def block(c_in, c_out):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out),
                         nn.ReLU())


class TwoHeadCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(block(1, 12), nn.MaxPool2d(2), block(12, 24),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head_a = nn.Linear(24, CLASSES)
        self.head_b = nn.Linear(24, CLASSES)

    def forward(self, x, task="a"):
        z = self.features(x)
        return self.head_a(z) if task == "a" else self.head_b(z)


def accuracy(model, x, y, task):
    model.eval()
    with torch.no_grad():
        return (model(x, task).argmax(1) == y).float().mean().item()


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(3)
    templates_a = torch.randn(CLASSES, 1, 10, 10, generator=gen)
    templates_b = torch.randn(CLASSES, 1, 10, 10, generator=gen)
    xa, ya = make_images(1200, templates_a, gen)
    xa_test, ya_test = make_images(500, templates_a, gen)
    xb, yb = make_images(480, templates_b, gen, gain=2.5, offset=1.5)
    xb_test, yb_test = make_images(500, templates_b, gen, gain=2.5, offset=1.5)
    loss_fn = nn.CrossEntropyLoss()

    # stage 1: "pretraining" on task A (no gradhunt: this is the pretrained checkpoint)
    model = TwoHeadCNN()
    opt_a = torch.optim.Adam(list(model.features.parameters()) + list(model.head_a.parameters()),
                             lr=3e-3)
    model.train()
    for step in range(PRETRAIN_STEPS):
        idx = torch.randint(0, len(xa), (64,), generator=gen)
        opt_a.zero_grad()
        loss_fn(model(xa[idx], "a"), ya[idx]).backward()
        opt_a.step()

    # stage 2: freeze the extractor (and head A), train head B on the new camera
    model.features.requires_grad_(False)
    model.head_a.requires_grad_(False)
    optimizer = torch.optim.SGD(model.head_b.parameters(), lr=0.05, momentum=0.9)
    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)
    order_gen = torch.Generator().manual_seed(4)
    for epoch in range(EPOCHS):
        model.train()
        if fixed:
            model.features.eval()      # fix: the frozen extractor keeps its statistics
        perm = torch.randperm(len(xb), generator=order_gen)
        for i in range(0, len(xb), BATCH):
            idx = perm[i:i + BATCH]
            optimizer.zero_grad()
            loss = loss_fn(model(xb[idx], "b"), yb[idx])
            loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(loss)

    acc_a = accuracy(model, xa_test, ya_test, "a")
    acc_b = accuracy(model, xb_test, yb_test, "b")
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": (acc_a + acc_b) / 2, "higher_is_better": True,
            "acc_a": acc_a, "acc_b": acc_b}
