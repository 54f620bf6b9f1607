"""Causal transformer LM, HF-style padded batches grouped by length, gradient accumulation that
averages the micro-batches' token-mean losses.

Model family: a one-block causal transformer language model (token + position embeddings,
``nn.TransformerEncoderLayer`` with a causal mask and a key-padding mask from
``attention_mask``), called with keywords: ``model(input_ids=..., attention_mask=...)``.
Labels are next-token ids with ``-100`` on padding (the HF convention).
Idiom: a ``LMTrainer`` class whose ``training_step`` method is the ``train_step``; AdamW; batches
of 16 sequences sorted by length (``group_by_length``), 4 accumulation micro-batches taken with
index slices of the input dict.
The bug: each micro-batch's loss is ``F.cross_entropy(..., ignore_index=-100)`` (a mean over that
micro-batch's real tokens) divided by ``accum_steps`` -- the mean of micro-batch means. A
micro-batch of short sequences has few real tokens, and each of its tokens weighs several times
more than a token of a long micro-batch (trl #2175, transformers #34191).
The fix: ``reduction="sum"`` divided by the window's number of scored tokens
(``num_items_in_batch``), so the step's gradient is the gradient of the whole batch's token-mean.

Measured (``python -m tests.blind.step_equivalence.lm_group_by_length_mean_of_means``, CPU,
OMP_NUM_THREADS=1): on the build() batch the buggy step's gradient is that of the
equal-weighted objective written by hand (``effective_loss``, rel. error ~1e-7) and differs from
the whole batch's token-mean gradient (micro-batches of 70, 33, 23, 14 real tokens): least-squares scale 1.054, rel. error 0.356, cosine 0.948;
the loss the loop reports is 3.471 where the whole batch's token-mean is 3.441. The fixed twin's
gradient is the objective's (rel. ~1e-7). After 150 steps the held-out token-mean loss is 0.394
(buggy) vs 0.324 (fixed); over training the buggy loop reported 1.348 on average where the
batches' token-mean (before each step) was 1.365. The quality gap is one seed's and not
asserted; the gradient discrepancy is.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = ("STEP_NOT_OBJECTIVE", "weighted equally")
QUALITY_GAP = False

V, T, D = 24, 24, 32
BATCH, ACCUM = 16, 4


class TinyCausalLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(T, D)
        self.block = nn.TransformerEncoderLayer(D, nhead=4, dim_feedforward=64, dropout=0.0,
                                                batch_first=True)
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, V)

    def forward(self, input_ids, attention_mask):
        t = input_ids.shape[1]
        h = self.tok(input_ids) + self.pos(torch.arange(t))
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        h = self.block(h, src_mask=causal, src_key_padding_mask=attention_mask == 0)
        return self.head(self.norm(h))


def lm_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=-100)


def make_batch(gen, n=BATCH):
    """Arithmetic sequences mod (V-1) over ids 1..V-1 (0 is padding), lengths 4..T+1,
    sorted longest first (group_by_length)."""
    lengths = torch.randint(4, T + 2, (n,), generator=gen).sort(descending=True).values
    start = torch.randint(0, V - 1, (n, 1), generator=gen)
    stride = torch.randint(1, 4, (n, 1), generator=gen)
    seq = (start + stride * torch.arange(T + 1)) % (V - 1) + 1
    pos = torch.arange(T)
    real = pos[None, :] < (lengths[:, None] - 1)
    input_ids = torch.where(real, seq[:, :-1], torch.zeros_like(seq[:, :-1]))
    labels = torch.where(real, seq[:, 1:], torch.full_like(seq[:, 1:], -100))
    return {"input_ids": input_ids, "attention_mask": real.long()}, labels


class LMTrainer:
    def __init__(self, accum_steps, fixed):
        self.accum_steps = accum_steps
        self.fixed = fixed

    def training_step(self, model, batch, optimizer):
        inputs, labels = batch
        optimizer.zero_grad()
        n = labels.shape[0]
        mb = n // self.accum_steps
        num_items_in_batch = (labels != -100).sum()
        logged = 0.0
        for i in range(0, n, mb):
            micro = {k: v[i:i + mb] for k, v in inputs.items()}
            logits = model(**micro)
            flat_logits = logits.reshape(-1, logits.shape[-1])
            flat_labels = labels[i:i + mb].reshape(-1)
            if self.fixed:
                loss = F.cross_entropy(flat_logits, flat_labels, ignore_index=-100,
                                       reduction="sum") / num_items_in_batch
            else:
                loss = F.cross_entropy(flat_logits, flat_labels, ignore_index=-100)
                loss = loss / self.accum_steps
            loss.backward()
            logged += loss.item()
        optimizer.step()
        return logged


def effective_loss(model, inputs, labels):
    """What the buggy step minimises, by hand: each micro-batch's token-mean, weighted 1/K."""
    logits = model(**inputs)
    tok = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100,
                          reduction="none").reshape(labels.shape)
    mask = (labels != -100).float()
    mb = labels.shape[0] // ACCUM
    parts = [(tok[i:i + mb] * mask[i:i + mb]).sum() / mask[i:i + mb].sum()
             for i in range(0, labels.shape[0], mb)]
    return sum(parts) / ACCUM


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = TinyCausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    inputs, targets = make_batch(torch.Generator().manual_seed(1))
    trainer = LMTrainer(ACCUM, fixed)
    return {"model": model, "loss_fn": lm_loss, "inputs": inputs, "targets": targets,
            "train_step": trainer.training_step, "optimizer": optimizer}


def train(fixed: bool, steps: int = 150) -> dict:
    objs = build(fixed)
    model, opt, step = objs["model"], objs["optimizer"], objs["train_step"]
    gen = torch.Generator().manual_seed(2)
    reported, true = [], []
    for _ in range(steps):
        inputs, labels = make_batch(gen)
        with torch.no_grad():  # the whole batch's token-mean, before the step
            true.append(float(lm_loss(model(**inputs), labels)))
        reported.append(step(model, (inputs, labels), opt))
    test_gen = torch.Generator().manual_seed(99)
    with torch.no_grad():
        losses = []
        for _ in range(8):
            inputs, labels = make_batch(test_gen)
            losses.append(float(lm_loss(model(**inputs), labels)))
    metric = sum(losses) / len(losses)
    return {"metric": metric, "higher_is_better": False,
            "evidence": f"held-out token-mean loss {metric:.4f}; over training the loop reported "
                        f"{sum(reported) / steps:.4f} on average where the batches' token-mean "
                        f"was {sum(true) / steps:.4f}"}


if __name__ == "__main__":
    from tests.blind.step_equivalence._common import measure_step
    for fixed in (False, True):
        print(fixed, measure_step(build(fixed), effective_loss), train(fixed))
