"""Dual-encoder retrieval model (query tower: mean-pooled embeddings + MLP; document tower:
Conv1d over token embeddings + max pooling) trained with InfoNCE over in-batch negatives.
The objective (``loss_fn``) scores every query against all 48 documents of the batch; the
buggy step splits the batch into micro-batches of 16 and computes InfoNCE inside each, so
each query sees 15 negatives instead of 47 -- not a reweighting of rows: the in-batch
objective is not decomposable over rows.

Model family: embedding / two-tower model; keyword inputs ``{"query", "doc"}`` (token ids),
targets ``arange(B)`` (query i's positive is document i); outputs a tuple of normalised
embeddings.
Idiom: ``RetrievalTrainer.train_step``; Adam.
The bug: per micro-batch ``infonce(q_b, d_b, arange(len_b))`` / n_micro.
The fix (GradCache, Gao et al. 2021): embed every micro-batch without gradient, compute the
whole batch's InfoNCE on the cached embeddings, take its gradient with respect to them, then
re-embed each micro-batch with gradient and backpropagate the cached gradient slice.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = ("STEP_NOT_OBJECTIVE", "")
V, D, LQ, LD, N, MB, TAU = 50, 32, 6, 14, 48, 16, 0.1


class DualEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_emb = nn.Embedding(V, D)
        self.q_mlp = nn.Sequential(nn.Linear(D, D), nn.ReLU(), nn.Linear(D, D))
        self.d_emb = nn.Embedding(V, D)
        self.d_conv = nn.Conv1d(D, D, 3, padding=1)
        self.d_out = nn.Linear(D, D)

    def forward(self, query, doc):
        q = self.q_mlp(self.q_emb(query).mean(1))
        d = self.d_conv(self.d_emb(doc).transpose(1, 2)).relu().amax(-1)
        return F.normalize(q, dim=-1), F.normalize(self.d_out(d), dim=-1)


def infonce(out, positives):
    q, d = out
    return F.cross_entropy(q @ d.T / TAU, positives)


def make_batch(gen, n=N):
    topic = torch.randint(0, 10, (n,), generator=gen)
    query = (topic[:, None] * 5 + torch.randint(0, 5, (n, LQ), generator=gen)) % V
    doc = torch.where(torch.rand(n, LD, generator=gen) < 0.5,
                      (topic[:, None] * 5 + torch.randint(0, 5, (n, LD), generator=gen)) % V,
                      torch.randint(0, V, (n, LD), generator=gen))
    return {"query": query, "doc": doc}, torch.arange(n)


class RetrievalTrainer:
    def __init__(self, fixed, micro_batch=MB):
        self.fixed = fixed
        self.mb = micro_batch

    def train_step(self, model, batch, optimizer):
        inputs, positives = batch
        n = positives.shape[0]
        slices = [slice(s, s + self.mb) for s in range(0, n, self.mb)]
        optimizer.zero_grad()
        if not self.fixed:
            logged = 0.0
            for sl in slices:
                q, d = model(inputs["query"][sl], inputs["doc"][sl])
                loss = infonce((q, d), torch.arange(q.shape[0])) / len(slices)
                loss.backward()
                logged += loss.item()
            optimizer.step()
            return logged
        with torch.no_grad():
            cached = [model(inputs["query"][sl], inputs["doc"][sl]) for sl in slices]
        q_all = torch.cat([c[0] for c in cached]).requires_grad_(True)
        d_all = torch.cat([c[1] for c in cached]).requires_grad_(True)
        loss = infonce((q_all, d_all), positives)
        gq, gd = torch.autograd.grad(loss, (q_all, d_all))
        for sl in slices:
            q, d = model(inputs["query"][sl], inputs["doc"][sl])
            torch.autograd.backward((q, d), (gq[sl], gd[sl]))
        optimizer.step()
        return loss.item()


def effective_loss(model, inputs, positives):
    parts = []
    for s in range(0, positives.shape[0], MB):
        sl = slice(s, s + MB)
        q, d = model(inputs["query"][sl], inputs["doc"][sl])
        parts.append(infonce((q, d), torch.arange(q.shape[0])))
    return sum(parts) / len(parts)


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = DualEncoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    inputs, positives = make_batch(torch.Generator().manual_seed(9))
    return {"model": model, "loss_fn": infonce, "inputs": inputs, "targets": positives,
            "train_step": RetrievalTrainer(fixed).train_step, "optimizer": optimizer}
