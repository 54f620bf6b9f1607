"""Self-attention text classifier trained with ``torch.amp.GradScaler("cpu")`` and gradient
accumulation; the loss is divided by the accumulation steps twice: once inside
``compute_loss`` and once more at ``scaler.scale(loss / accum).backward()``.

Model family: attention (token embedding + ``nn.MultiheadAttention`` self-attention +
learned-query attention pooling + linear head), fixed-length token sequences (no padding).
Idiom: a ``ScaledAccumTrainer`` holding a ``GradScaler``: ``scaler.scale(...).backward()`` per
micro-batch, ``scaler.unscale_`` + ``clip_grad_norm_`` (max_norm 1e3, never acts),
``scaler.step`` / ``scaler.update``; 4 equal micro-batches by ``torch.chunk``; Adamax.
The bug: ``scaler.scale(loss / self.accum)`` where ``compute_loss`` already returned
``criterion(...) / self.accum``: the gradient at the step (unscaled) is 1/4 of the objective's.
The fix: ``scaler.scale(loss)``.
"""
import torch
import torch.nn as nn

EXPECTED = ("STEP_NOT_OBJECTIVE", "scaled by")
V, D, L, N, ACCUM, C = 40, 32, 12, 48, 4, 2
SCALE = 1.0 / ACCUM


class AttnPoolClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.pos = nn.Parameter(torch.randn(L, D) * 0.1)
        self.attn = nn.MultiheadAttention(D, 4, batch_first=True)
        self.norm = nn.LayerNorm(D)
        self.query = nn.Parameter(torch.randn(1, 1, D) * 0.1)
        self.pool = nn.MultiheadAttention(D, 1, batch_first=True)
        self.head = nn.Linear(D, C)

    def forward(self, tokens):
        h = self.emb(tokens) + self.pos
        a, _ = self.attn(h, h, h, need_weights=False)
        h = self.norm(h + a)
        q = self.query.expand(tokens.shape[0], -1, -1)
        pooled, _ = self.pool(q, h, h, need_weights=False)
        return self.head(pooled[:, 0])


def make_batch(gen, n=N):
    tokens = torch.randint(0, V, (n, L), generator=gen)
    y = ((tokens < 10).sum(1) > (tokens >= 30).sum(1)).long()   # more "low" than "high" words
    return tokens, y


class ScaledAccumTrainer:
    def __init__(self, fixed, accum=ACCUM):
        self.fixed = fixed
        self.accum = accum
        self.criterion = nn.CrossEntropyLoss()
        self.scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)

    def compute_loss(self, model, xb, yb):
        return self.criterion(model(xb), yb) / self.accum

    def train_step(self, model, batch, optimizer):
        x, y = batch
        optimizer.zero_grad(set_to_none=True)
        logged = 0.0
        for xb, yb in zip(x.chunk(self.accum), y.chunk(self.accum)):
            loss = self.compute_loss(model, xb, yb)
            if self.fixed:
                self.scaler.scale(loss).backward()
            else:
                self.scaler.scale(loss / self.accum).backward()
            logged += loss.item()
        self.scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1e3)
        self.scaler.step(optimizer)
        self.scaler.update()
        return logged


def effective_loss(model, x, y):
    return nn.functional.cross_entropy(model(x), y) / ACCUM


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = AttnPoolClassifier()
    optimizer = torch.optim.Adamax(model.parameters(), lr=2e-3)
    x, y = make_batch(torch.Generator().manual_seed(6))
    return {"model": model, "loss_fn": nn.CrossEntropyLoss(), "inputs": x, "targets": y,
            "train_step": ScaledAccumTrainer(fixed).train_step, "optimizer": optimizer}
