"""HEALTHY: MLP classifier, accumulation over equal-size micro-batches of a row-mean loss divided
by the number of micro-batches, then ``clip_grad_norm_`` at a generous max_norm that never acts.

Model family: 3-layer MLP (20 features, 5 classes); batch 48 in 4 micro-batches of 12 taken with
``Tensor.chunk``. Idiom: a ``Trainer`` class whose ``train_step`` method is used; SGD with
Nesterov momentum. Equal micro-batches make the mean of their row-means the whole batch's
row-mean, so the step's gradient is the objective's (rel. error ~1e-7, measured in
test_pairs.py); the gradient norm (~0.5) is far below max_norm=50.
"""
import torch
import torch.nn as nn

BATCH, ACCUM, CLASSES = 48, 4, 5


class Trainer:
    def __init__(self, accum_steps=ACCUM, max_norm=50.0):
        self.accum_steps = accum_steps
        self.max_norm = max_norm
        self.criterion = nn.CrossEntropyLoss()

    def train_step(self, model, batch, optimizer):
        x, y = batch
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for xb, yb in zip(x.chunk(self.accum_steps), y.chunk(self.accum_steps)):
            loss = self.criterion(model(xb), yb) / self.accum_steps
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), self.max_norm)
        optimizer.step()
        return total


def make_batch(gen, n=BATCH):
    x = torch.randn(n, 20, generator=gen)
    y = (x[:, :5] * torch.arange(1, 6)).argmax(1)
    return x, y


def build(fixed: bool = True) -> dict:
    assert fixed
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, CLASSES))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    x, y = make_batch(torch.Generator().manual_seed(1))
    return {"model": model, "loss_fn": nn.CrossEntropyLoss(), "inputs": x, "targets": y,
            "train_step": Trainer().train_step, "optimizer": optimizer}
