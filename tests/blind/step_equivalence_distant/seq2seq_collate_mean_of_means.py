"""Encoder-decoder (transformer encoder + GRU decoder with dot attention) for a toy
transduction task; gradient accumulation over micro-batches made by a ``DataLoader`` with a
custom ``collate_fn`` that trims padding, each micro-batch's token-mean cross-entropy divided
by the number of micro-batches.

Model family: seq2seq. Inputs are keyword tensors ``{"src", "tgt_in"}`` (padded with 0,
src padding masked in the encoder and the cross-attention), targets ``(B, T)`` with -100 at
padding; the batch is bucketed by target length (sorted), so the micro-batches hold very
different numbers of real target tokens.
Idiom: ``Seq2SeqTrainer.train_step``; inside, ``DataLoader(range(B), batch_size=8,
collate_fn=...)`` gathers the rows and trims the padded columns; NAdam.
The bug: ``F.cross_entropy(..., ignore_index=-100) / len(loader)`` -- a mean of per-micro-batch
token means: micro-batches with few target tokens are weighted like those with many.
The fix: ``F.cross_entropy(..., ignore_index=-100, reduction="sum") / n_tokens`` with the
whole batch's count of scored tokens.

Measured (test_pairs.py, CPU): see the harness docstring.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

EXPECTED = ("STEP_NOT_OBJECTIVE", "weighted equally")
V, D, B, MB = 16, 32, 24, 8


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_emb = nn.Embedding(V, D, padding_idx=0)
        self.pos = nn.Parameter(torch.randn(32, D) * 0.1)
        self.enc = nn.TransformerEncoderLayer(D, 2, 64, dropout=0.0, batch_first=True)
        self.tgt_emb = nn.Embedding(V, D, padding_idx=0)
        self.dec = nn.GRU(D, D, batch_first=True)
        self.out = nn.Linear(2 * D, V)

    def forward(self, src, tgt_in):
        pad = src == 0
        h = self.src_emb(src) + self.pos[: src.shape[1]]
        enc = self.enc(h, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        h0 = (enc * keep).sum(1) / keep.sum(1)
        dec, _ = self.dec(self.tgt_emb(tgt_in), h0.unsqueeze(0).contiguous())
        scores = dec @ enc.transpose(1, 2) / D ** 0.5
        scores = scores.masked_fill(pad.unsqueeze(1), float("-inf"))
        ctx = scores.softmax(-1) @ enc
        return self.out(torch.cat([dec, ctx], -1))


def token_ce(logits, labels):
    return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)


def make_batch(gen, n=B):
    rows = []
    for _ in range(n):
        s = int(torch.randint(2, 10, (1,), generator=gen))
        src = torch.randint(3, V, (s,), generator=gen)
        tgt = torch.flip(src, [0]) if s % 2 else (src % 7) + 3   # reverse or map
        rows.append((src, tgt))
    rows.sort(key=lambda r: len(r[1]))
    S = max(len(r[0]) for r in rows)
    T = max(len(r[1]) for r in rows) + 1
    src = torch.zeros(n, S, dtype=torch.long)
    tgt_in = torch.zeros(n, T, dtype=torch.long)
    labels = torch.full((n, T), -100)
    for i, (s, t) in enumerate(rows):
        src[i, : len(s)] = s
        tgt_in[i, 0] = 1                       # BOS
        tgt_in[i, 1: len(t) + 1] = t
        labels[i, : len(t)] = t
        labels[i, len(t)] = 2                  # EOS
    return {"src": src, "tgt_in": tgt_in}, labels


class Seq2SeqTrainer:
    def __init__(self, fixed):
        self.fixed = fixed

    def collate(self, inputs, labels):
        def fn(idx):
            idx = torch.tensor(idx)
            src, tgt_in, lab = inputs["src"][idx], inputs["tgt_in"][idx], labels[idx]
            s = int((src != 0).sum(1).max())
            t = int((lab != -100).sum(1).max())
            return {"src": src[:, :s], "tgt_in": tgt_in[:, :t]}, lab[:, :t]
        return fn

    def train_step(self, model, batch, optimizer):
        inputs, labels = batch
        optimizer.zero_grad()
        loader = DataLoader(list(range(labels.shape[0])), batch_size=MB, shuffle=False,
                            collate_fn=self.collate(inputs, labels))
        n_tokens = int((labels != -100).sum())
        logged = 0.0
        for mb_inputs, mb_labels in loader:
            logits = model(**mb_inputs)
            if self.fixed:
                loss = F.cross_entropy(logits.reshape(-1, V), mb_labels.reshape(-1),
                                       ignore_index=-100, reduction="sum") / n_tokens
            else:
                loss = F.cross_entropy(logits.reshape(-1, V), mb_labels.reshape(-1),
                                       ignore_index=-100) / len(loader)
            loss.backward()
            logged += loss.item()
        optimizer.step()
        return logged


def effective_loss(model, inputs, labels):
    parts = []
    for s in range(0, labels.shape[0], MB):
        sl = slice(s, s + MB)
        parts.append(token_ce(model(inputs["src"][sl], inputs["tgt_in"][sl]), labels[sl]))
    return sum(parts) / len(parts)


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = Seq2Seq()
    optimizer = torch.optim.NAdam(model.parameters(), lr=2e-3)
    inputs, labels = make_batch(torch.Generator().manual_seed(3))
    return {"model": model, "loss_fn": token_ce, "inputs": inputs, "targets": labels,
            "train_step": Seq2SeqTrainer(fixed).train_step, "optimizer": optimizer}
