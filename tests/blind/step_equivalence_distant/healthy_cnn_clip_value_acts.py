"""HEALTHY: small 2-D CNN (GroupNorm) on 12x12 images; whole-batch mean cross-entropy, then
``torch.nn.utils.clip_grad_value_(model.parameters(), clip_value=CLIP_VALUE)`` at a value that
does act (a sizeable share of the gradient's entries are clamped), then
``torch.optim.SGD(momentum=0.9)``.

The step's gradient before clipping is the objective's; at the step it is the objective's
gradient clamped entrywise to [-CLIP_VALUE, CLIP_VALUE] (measured in test_pairs.py). Clipping
is the user's deliberate choice, not a different objective.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CLIP_VALUE = 0.01
N, C = 32, 4


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, C))

    def forward(self, x):
        return self.net(x)


def make_batch(gen, n=N):
    y = torch.randint(0, C, (n,), generator=gen)
    x = 0.5 * torch.randn(n, 1, 12, 12, generator=gen)
    for k in range(C):
        x[y == k, 0, k * 3:(k + 1) * 3, :] += 1.5     # a bright band per class
    return x, y


def train_step(model, batch, optimizer):
    x, y = batch
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_value_(model.parameters(), clip_value=CLIP_VALUE)
    optimizer.step()
    return loss.item()


def build(fixed: bool = True) -> dict:
    torch.manual_seed(0)
    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = make_batch(torch.Generator().manual_seed(11))
    return {"model": model, "loss_fn": F.cross_entropy, "inputs": x, "targets": y,
            "train_step": train_step, "optimizer": optimizer}
