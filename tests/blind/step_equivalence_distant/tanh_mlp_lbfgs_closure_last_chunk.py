"""Tanh MLP fitting a smooth 2-D field (a small physics-style surrogate) with full-batch
L-BFGS; the closure is defined inside a loop over memory-bounded chunks and the
``optimizer.step(closure)`` is called after the loop, so the closure scores only the loop
variable's last value -- the last chunk (rows 48..63 of 64).

Model family: MLP regression (Tanh, no normalisation), 2 inputs -> 1 output.
Idiom: ``optimizer.step(closure)`` with ``torch.optim.LBFGS`` (strong-Wolfe line search,
max_iter 5); a plain ``train_step`` function; the batch is walked in chunks of 16 "so the
forward fits".
The bug: the closure reads ``xb, yb`` (late binding: after the loop they are the last chunk);
``loss = mse(model(xb), yb)``.
The fix: the closure accumulates over every chunk, each chunk's mean weighted by its share of
the rows.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = ("STEP_NOT_OBJECTIVE", "dropped")
N, CH = 64, 16


class FieldMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                                 nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x)


def make_batch(gen, n=N):
    x = torch.rand(n, 2, generator=gen) * 2 - 1
    y = (torch.sin(3 * x[:, :1]) * torch.cos(2 * x[:, 1:]) + 0.5 * x[:, :1] ** 2)
    return x, y


def make_train_step(fixed):
    def train_step(model, batch, optimizer):
        x, y = batch
        n = x.shape[0]
        chunks = list(zip(x.split(CH), y.split(CH)))
        if fixed:
            def closure():
                optimizer.zero_grad()
                total = 0.0
                for xb, yb in chunks:
                    loss = F.mse_loss(model(xb), yb) * (xb.shape[0] / n)
                    loss.backward()
                    total = total + loss.detach()
                return total
        else:
            for xb, yb in chunks:
                def closure():
                    optimizer.zero_grad()
                    loss = F.mse_loss(model(xb), yb)
                    loss.backward()
                    return loss
        return optimizer.step(closure)
    return train_step


def effective_loss(model, x, y):
    return F.mse_loss(model(x[-CH:]), y[-CH:])


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = FieldMLP()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=5, history_size=10,
                                  line_search_fn="strong_wolfe")
    x, y = make_batch(torch.Generator().manual_seed(7))
    return {"model": model, "loss_fn": nn.MSELoss(), "inputs": x, "targets": y,
            "train_step": make_train_step(fixed), "optimizer": optimizer}
