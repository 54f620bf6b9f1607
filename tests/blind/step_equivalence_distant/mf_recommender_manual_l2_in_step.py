"""Matrix-factorisation recommender (user/item embeddings + biases, dot product); the step
adds an L2 penalty on the embedding tables to the loss by hand, while ``loss_fn`` (the
objective the user states) is the plain rating MSE.

Model family: embedding model; keyword inputs ``{"user", "item"}``, float ratings.
Idiom: a plain ``train_step`` closure over a ``reg`` coefficient; whole batch; plain SGD.
The bug: ``loss = F.mse_loss(pred, r) + reg * (U.pow(2).sum() + I.pow(2).sum())`` -- the
gradient at the step carries the penalty's ``2 * reg * W`` on every row of both tables
(rows of users and items absent from the batch too), which ``loss_fn`` does not have.
The fix: the decay moved into the optimizer (``SGD(weight_decay=2 * reg)`` on the embedding
tables), so the step's ``.grad`` is the objective's.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = ("STEP_NOT_OBJECTIVE", "")
USERS, ITEMS, K, N, REG = 30, 40, 8, 64, 0.05


class MF(nn.Module):
    def __init__(self):
        super().__init__()
        self.U = nn.Embedding(USERS, K)
        self.I = nn.Embedding(ITEMS, K)
        self.ub = nn.Embedding(USERS, 1)
        self.ib = nn.Embedding(ITEMS, 1)
        for e in (self.U, self.I):
            nn.init.normal_(e.weight, std=0.3)
        for e in (self.ub, self.ib):
            nn.init.zeros_(e.weight)

    def forward(self, user, item):
        return ((self.U(user) * self.I(item)).sum(-1) + self.ub(user).squeeze(-1)
                + self.ib(item).squeeze(-1))


def make_batch(gen, n=N):
    tu = torch.randn(USERS, 3, generator=gen)
    ti = torch.randn(ITEMS, 3, generator=gen)
    user = torch.randint(0, USERS, (n,), generator=gen)
    item = torch.randint(0, ITEMS, (n,), generator=gen)
    r = (tu[user] * ti[item]).sum(-1) + 0.1 * torch.randn(n, generator=gen)
    return {"user": user, "item": item}, r


def make_train_step(fixed, reg=REG):
    def train_step(model, batch, optimizer):
        inputs, r = batch
        optimizer.zero_grad()
        loss = F.mse_loss(model(**inputs), r)
        if not fixed:
            loss = loss + reg * (model.U.weight.pow(2).sum() + model.I.weight.pow(2).sum())
        loss.backward()
        optimizer.step()
        return loss.item()
    return train_step


def effective_loss(model, inputs, r):
    return (F.mse_loss(model(**inputs), r)
            + REG * (model.U.weight.pow(2).sum() + model.I.weight.pow(2).sum()))


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = MF()
    tables = [model.U.weight, model.I.weight]
    biases = [model.ub.weight, model.ib.weight]
    if fixed:
        groups = [{"params": tables, "weight_decay": 2 * REG}, {"params": biases}]
    else:
        groups = [{"params": tables}, {"params": biases}]
    optimizer = torch.optim.SGD(groups, lr=0.5)
    inputs, r = make_batch(torch.Generator().manual_seed(10))
    return {"model": model, "loss_fn": nn.MSELoss(), "inputs": inputs, "targets": r,
            "train_step": make_train_step(fixed), "optimizer": optimizer}
