"""Multi-task residual MLP with RMSNorm and two heads (3-class classification + a regression
value); ``loss_fn`` is the sum of both heads' losses (outputs and targets are dicts), and the
trainer adds the auxiliary head's loss a second time on top of the helper's total.

Model family: MLP with ``nn.RMSNorm`` residual blocks, dict output ``{"logits", "value"}``;
targets a dict ``{"label", "value"}``.
Idiom: a ``MultiTaskTrainer`` whose ``head_losses`` returns ``(total, parts)``; the step
walks 4 equal micro-batches (dict slicing), ``total / accum`` per micro-batch; Adadelta.
The bug: ``loss = total + self.aux_weight * parts["value"]`` (aux_weight 1.0, "the paper's
auxiliary weight") -- the value head's loss is already in ``total``, so it counts twice.
The fix: ``loss = total``.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = ("STEP_NOT_OBJECTIVE", "")
N, F_IN, D, C, ACCUM = 48, 10, 48, 3, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.RMSNorm(D)
        self.ff = nn.Sequential(nn.Linear(D, 2 * D), nn.SiLU(), nn.Linear(2 * D, D))

    def forward(self, h):
        return h + self.ff(self.norm(h))


class MultiTaskNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(F_IN, D)
        self.blocks = nn.Sequential(Block(), Block())
        self.cls = nn.Linear(D, C)
        self.reg = nn.Linear(D, 1)

    def forward(self, x):
        h = self.blocks(self.inp(x))
        return {"logits": self.cls(h), "value": self.reg(h).squeeze(-1)}


def multitask_loss(out, t):
    return F.cross_entropy(out["logits"], t["label"]) + F.mse_loss(out["value"], t["value"])


def make_batch(gen, n=N):
    x = torch.randn(n, F_IN, generator=gen)
    label = (x[:, 0] + x[:, 1] > 0).long() + (x[:, 2] > 1).long()
    value = 2.0 * x[:, 3] - x[:, 4] ** 2 + 0.1 * torch.randn(n, generator=gen)
    return x, {"label": label, "value": value}


class MultiTaskTrainer:
    def __init__(self, fixed, accum=ACCUM, aux_weight=1.0):
        self.fixed = fixed
        self.accum = accum
        self.aux_weight = aux_weight

    def head_losses(self, out, t):
        parts = {"label": F.cross_entropy(out["logits"], t["label"]),
                 "value": F.mse_loss(out["value"], t["value"])}
        return parts["label"] + parts["value"], parts

    def train_step(self, model, batch, optimizer):
        x, t = batch
        mb = x.shape[0] // self.accum
        optimizer.zero_grad()
        logged = 0.0
        for s in range(0, x.shape[0], mb):
            tb = {k: v[s:s + mb] for k, v in t.items()}
            total, parts = self.head_losses(model(x[s:s + mb]), tb)
            loss = total if self.fixed else total + self.aux_weight * parts["value"]
            (loss / self.accum).backward()
            logged += loss.item() / self.accum
        optimizer.step()
        return logged


def effective_loss(model, x, t):
    out = model(x)
    return F.cross_entropy(out["logits"], t["label"]) + 2 * F.mse_loss(out["value"], t["value"])


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = MultiTaskNet()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    x, t = make_batch(torch.Generator().manual_seed(8))
    return {"model": model, "loss_fn": multitask_loss, "inputs": x, "targets": t,
            "train_step": MultiTaskTrainer(fixed).train_step, "optimizer": optimizer}
