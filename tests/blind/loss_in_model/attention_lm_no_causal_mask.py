"""A hand-written causal self-attention LM whose mask was left out; loss inside forward.

The model returns a tuple ``(loss, logits)`` (the ``return_dict=False`` convention), shifts its
labels correctly, and is trained by a ``train_step(model, batch, optimizer)`` function with
AdamW. The bug: the attention scores are never masked, so position t attends to the tokens
after it, among them token t + 1, the one it is scored against. The training loss falls far
below what the data allows; at generation time the future is not there and the model is lost.

Data: sequences over 16 tokens where token t is a fixed function of tokens t - 1 and t - 2
with probability 0.9 (attention over the past is needed). Metric: next-token accuracy on
held-out sequences measured as generation sees it, each position predicted from its prefix
alone (the model run on ``input_ids[:, :t + 1]``); measured without gradhunt,
buggy 0.110 -> fixed 0.817.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

EXPECTED = "CAUSALITY_LEAK"
CAUSAL = True

VOCAB, LENGTH, BATCH, STEPS, DIM, HEADS = 16, 16, 32, 200, 32, 2


class SelfAttention(nn.Module):
    def __init__(self, *, causal):
        super().__init__()
        self.causal = causal
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(DIM // HEADS)
        if self.causal:
            future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        # bug (causal=False): nothing keeps position t from attending to t + 1, t + 2, ...
        out = scores.softmax(-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, t, DIM))


class Block(nn.Module):
    def __init__(self, *, causal):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.attn = SelfAttention(causal=causal)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformerLM(nn.Module):
    def __init__(self, *, causal):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(LENGTH, DIM)
        self.blocks = nn.Sequential(Block(causal=causal), Block(causal=causal))
        self.ln = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, input_ids, labels=None):
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.blocks(self.tok(input_ids) + self.pos(positions))
        logits = self.head(self.ln(x))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
        return loss, logits


def loss_fn(output, labels):
    """What a user hands gradhunt's tools: the loss the model computed (the tuple's first)."""
    return output[0]


def _sequences(n, generator):
    table = torch.randint(0, VOCAB, (VOCAB, VOCAB), generator=torch.Generator().manual_seed(11))
    tokens = torch.randint(0, VOCAB, (n, LENGTH), generator=generator)
    for t in range(2, LENGTH):
        follow = torch.rand(n, generator=generator) < 0.9
        tokens[:, t] = torch.where(follow, table[tokens[:, t - 2], tokens[:, t - 1]],
                                   tokens[:, t])
    return tokens


def train_step(model, batch, optimizer):
    optimizer.zero_grad()
    loss, _ = model(**batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


def make(fixed=False):
    torch.manual_seed(0)
    model = TinyTransformerLM(causal=fixed)
    tokens = _sequences(BATCH, torch.Generator().manual_seed(1))
    return model, {"input_ids": tokens, "labels": tokens.clone()}


def _prefix_accuracy(model, tokens):
    right = 0
    with torch.no_grad():
        for t in range(1, LENGTH - 1):
            _, logits = model(input_ids=tokens[:, :t + 1])
            right += (logits[:, -1].argmax(-1) == tokens[:, t + 1]).sum().item()
    return right / (len(tokens) * (LENGTH - 2))


def run(fixed=False, monitor=False):
    import gradhunt

    torch.manual_seed(0)
    model = TinyTransformerLM(causal=fixed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    generator = torch.Generator().manual_seed(1)
    train = _sequences(4096, generator)
    held_out = _sequences(256, generator)
    mon = gradhunt.Monitor(model, optimizer, every=25) if monitor else None
    try:
        for step in range(STEPS):
            rows = torch.randint(0, len(train), (BATCH,), generator=generator)
            batch = {"input_ids": train[rows], "labels": train[rows]}
            loss = train_step(model, batch, optimizer)
            if mon is not None:
                mon.step(loss)
    finally:
        if mon is not None:
            mon.close()
    model.eval()
    return {"report": mon.report() if mon is not None else None,
            "metric": _prefix_accuracy(model, held_out), "higher_is_better": True}
