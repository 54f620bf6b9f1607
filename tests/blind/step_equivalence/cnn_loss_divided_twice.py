"""Small CNN image classifier; accumulation where the loss is divided by the accumulation steps
twice (once in a helper, once again in the loop).

Model family: two-conv CNN on 1x12x12 synthetic images (6 noisy class templates).
Idiom: a plain ``train_step`` function splitting the batch with ``Tensor.split`` into 4
micro-batches; SGD with momentum 0.9 (so the gradient's size is the step's size).
The bug: ``compute_loss`` already returns ``F.cross_entropy(...) / ACCUM_STEPS`` and the loop
calls ``(loss / ACCUM_STEPS).backward()``: the step's gradient is the whole batch's gradient
scaled by 1/4.
The fix: ``loss.backward()`` in the loop.

Measured (CPU, OMP_NUM_THREADS=1): the buggy step's gradient is the objective's scaled by
exactly 0.250 (cosine 1.0); the loss the loop reports is 1.8195, the same as the whole batch's
mean cross-entropy (the logged ``loss`` is the once-divided one). Held-out accuracy after 150
steps: 0.499 (buggy) vs 0.766 (fixed).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = ("STEP_NOT_OBJECTIVE", "scaled by")
QUALITY_GAP = True

ACCUM_STEPS = 4
BATCH, CLASSES = 32, 6
SCALE = 0.25  # the step's gradient / the objective's gradient
_TEMPLATES = (torch.rand(CLASSES, 1, 12, 12, generator=torch.Generator().manual_seed(123))
              > 0.5).float()


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 3 * 3, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def make_batch(gen, n=BATCH):
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    x = _TEMPLATES[y] + 1.2 * torch.randn(n, 1, 12, 12, generator=gen)
    return x, y


def compute_loss(model, xb, yb):
    # normalised for gradient accumulation
    return F.cross_entropy(model(xb), yb) / ACCUM_STEPS


def make_train_step(fixed):
    def train_step(model, batch, optimizer):
        x, y = batch
        optimizer.zero_grad()
        mb = x.shape[0] // ACCUM_STEPS
        total = 0.0
        for xb, yb in zip(x.split(mb), y.split(mb)):
            loss = compute_loss(model, xb, yb)
            if fixed:
                loss.backward()
            else:
                (loss / ACCUM_STEPS).backward()
            total += loss.item()
        optimizer.step()
        return total
    return train_step


def effective_loss(model, x, y):
    """By hand: the whole batch's mean cross-entropy times 1/ACCUM_STEPS."""
    return F.cross_entropy(model(x), y) / ACCUM_STEPS


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = make_batch(torch.Generator().manual_seed(1))
    return {"model": model, "loss_fn": nn.CrossEntropyLoss(), "inputs": x, "targets": y,
            "train_step": make_train_step(fixed), "optimizer": optimizer}


def train(fixed: bool, steps: int = 150) -> dict:
    objs = build(fixed)
    model, opt, step = objs["model"], objs["optimizer"], objs["train_step"]
    gen = torch.Generator().manual_seed(2)
    for _ in range(steps):
        step(model, make_batch(gen), opt)
    x, y = make_batch(torch.Generator().manual_seed(99), n=1000)
    with torch.no_grad():
        acc = float((model(x).argmax(1) == y).float().mean())
    return {"metric": acc, "higher_is_better": True,
            "evidence": f"held-out accuracy {acc:.4f} after {steps} steps"}


if __name__ == "__main__":
    from tests.blind.step_equivalence._common import measure_step
    for fixed in (False, True):
        print(fixed, measure_step(build(fixed), effective_loss), train(fixed))
