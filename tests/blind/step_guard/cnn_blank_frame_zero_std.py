"""A small CNN whose per-image standardisation divides by the zero std of one blank frame.

Bug: the Dataset standardises each image by its own mean and std; one training frame is blank
(a dropped camera frame, every pixel 0.5), so ``(img - mean) / std`` is 0/0 = NaN for all its
pixels. Each epoch's batch holding it has a NaN loss and NaN gradients, and Adam writes NaN into
the weights and its moments at the first of them.
Fixed: ``std.clamp_min(1e-6)`` (a blank frame becomes zeros).
Idiom: a ``Dataset`` with a transform and a shuffling ``DataLoader`` over epochs, Adam, no
scheduler.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from tests.blind.step_guard._common import execute

KIND = "nonfinite"
BAD_STEPS = frozenset({38, 44})
HIGHER_IS_BETTER = True
TOLERANCE = 0.05          # held-out accuracy, absolute
BLANK = 203
EPOCHS, BATCH = 3, 32


def _images(n, g):
    """Bars: class 0 horizontal, 1 vertical, 2 diagonal, on noise, at random brightness."""
    y = torch.randint(0, 3, (n,), generator=g)
    x = 0.3 * torch.randn(n, 1, 12, 12, generator=g)
    pos = torch.randint(2, 10, (n,), generator=g)
    for i in range(n):
        p = int(pos[i])
        if y[i] == 0:
            x[i, 0, p, :] += 2.0
        elif y[i] == 1:
            x[i, 0, :, p] += 2.0
        else:
            x[i, 0].diagonal().add_(2.0)
    x = x * (torch.rand(n, 1, 1, 1, generator=g) * 3 + 0.5) + torch.rand(n, 1, 1, 1, generator=g)
    return x, y


class Frames(Dataset):
    def __init__(self, x, y, fixed):
        self.x, self.y, self.fixed = x, y, fixed

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        img = self.x[i]
        std = img.std()
        if self.fixed:
            std = std.clamp_min(1e-6)
        return (img - img.mean()) / std, self.y[i]


def run(fixed, *, guard=None, guard_replay=False, **reference):
    g = torch.Generator().manual_seed(5)
    x, y = _images(900, g)
    x[BLANK] = 0.5
    train_set, test_set = Frames(x[:700], y[:700], fixed), Frames(x[700:], y[700:], True)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(16, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(train_set, batch_size=BATCH, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(7))

    def train(control):
        model.train()
        for _ in range(EPOCHS):
            for images, labels in loader:
                optimizer.zero_grad()
                loss = loss_fn(model(images), labels)
                loss.backward()
                control.step(optimizer, loss)

    def evaluate():
        model.eval()
        xs, ys = zip(*(test_set[i] for i in range(len(test_set))))
        return (model(torch.stack(xs)).argmax(1) == torch.stack(ys)).float().mean()

    return execute(model, optimizer, train, evaluate, guard=guard, guard_replay=guard_replay,
                   **reference)
