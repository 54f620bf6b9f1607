"""Healthy: fine-tuning a CNN with a frozen backbone, whose last block is unfrozen mid-run.

For the first steps only the head trains; at the unfreeze the block's parameters join the
optimizer (``add_param_group``) and the gradient norm jumps, because more parameters now have a
gradient. That is the plan, not a bad step.
Idiom: a trainer-style loop over a ``DataLoader`` by epochs, SGD with momentum, a backbone
"pre-trained" on a related task first (in the same function).
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.blind.step_guard._common import execute

KIND = "healthy"
BAD_STEPS = frozenset()
HIGHER_IS_BETTER = True
BASELINE = 0.6            # held-out accuracy; chance is 0.25
EPOCHS, UNFREEZE_EPOCH, BATCH = 4, 2, 32


def _blobs(n, g, shift):
    """4 classes: a bright square in one of the four quadrants (shifted for the fine-tune task)."""
    y = torch.randint(0, 4, (n,), generator=g)
    x = 0.5 * torch.randn(n, 1, 12, 12, generator=g)
    for i in range(n):
        r, c = divmod(int(y[i]), 2)
        x[i, 0, r * 6 + shift:r * 6 + shift + 3, c * 6 + shift:c * 6 + shift + 3] += 2.0
    return x, y


def run(fixed=True, *, guard=None, guard_replay=False, **reference):
    g = torch.Generator().manual_seed(40)
    torch.manual_seed(0)
    block1 = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
    block2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                           nn.Flatten())
    head = nn.Linear(64, 4)
    model = nn.Sequential(block1, block2, head)
    pre_x, pre_y = _blobs(400, g, shift=0)                   # "pre-training", outside the watch
    pre_opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for i in range(0, 400, 32):
        pre_opt.zero_grad()
        nn.functional.cross_entropy(model(pre_x[i:i + 32]), pre_y[i:i + 32]).backward()
        pre_opt.step()
    nn.init.normal_(head.weight, std=0.05)
    nn.init.zeros_(head.bias)
    for p in list(block1.parameters()) + list(block2.parameters()):
        p.requires_grad_(False)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.05, momentum=0.9)
    x, y = _blobs(800, g, shift=2)
    loader = DataLoader(TensorDataset(x[:600], y[:600]), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(8))
    loss_fn = nn.CrossEntropyLoss()

    def train(control):
        model.train()
        for epoch in range(EPOCHS):
            if epoch == UNFREEZE_EPOCH:
                for p in block2.parameters():
                    p.requires_grad_(True)
                optimizer.add_param_group({"params": list(block2.parameters()), "lr": 0.01})
            for xb, yb in loader:
                optimizer.zero_grad()
                loss = loss_fn(model(xb), yb)
                loss.backward()
                control.step(optimizer, loss)

    def evaluate():
        model.eval()
        return (model(x[600:]).argmax(1) == y[600:]).float().mean()

    return execute(model, optimizer, train, evaluate, guard=guard, guard_replay=guard_replay,
                   **reference)
