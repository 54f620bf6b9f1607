"""A tiny causal transformer language model written Hugging Face style
(``model(input_ids=, attention_mask=, labels=)`` returns ``{"loss", "logits"}``, the labels
shifted inside), trained with AdamW on right-padded batches of counting sequences.

Bug: the collate function hides the padding from the loss the wrong way round,
``labels = input_ids.masked_fill(attention_mask == 1, -100)`` where ``attention_mask == 0`` was
meant: every real token is set to -100 and only the padding is scored. The loss falls fast
(predict the pad id next), and the model never learns the sequences. Fixed: ``== 0``.

Measured without gradhunt (held-out next-token accuracy on real positions): buggy 0.000,
fixed 0.885.
"""
import numpy as np
import torch
from torch import nn

import gradhunt

EXPECTED = "PADDING_SCORED"
PAD_ID = 0
VOCAB = 24           # 0 is padding, 1-23 real tokens
MAX_LEN = 20


def make_sequences(n, rng):
    """Counting sequences: a start token and a stride, wrapping around the real tokens."""
    out = []
    for _ in range(n):
        start, stride = int(rng.integers(0, VOCAB - 1)), int(rng.integers(1, 4))
        length = int(rng.integers(4, MAX_LEN // 2 + 1))
        out.append([1 + (start + stride * k) % (VOCAB - 1) for k in range(length)])
    return out


def collate(sequences, fixed):
    input_ids = torch.full((len(sequences), MAX_LEN), PAD_ID, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), MAX_LEN), dtype=torch.long)
    for i, seq in enumerate(sequences):
        input_ids[i, :len(seq)] = torch.tensor(seq)
        attention_mask[i, :len(seq)] = 1
    if fixed:
        labels = input_ids.masked_fill(attention_mask == 0, -100)
    else:
        labels = input_ids.masked_fill(attention_mask == 1, -100)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


class TinyCausalLM(nn.Module):
    def __init__(self, d_model=32):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Embedding(MAX_LEN, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=64, dropout=0.0,
                                           batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.lm_head = nn.Linear(d_model, VOCAB)

    def forward(self, input_ids, attention_mask=None, labels=None):
        length = input_ids.shape[1]
        h = self.tok(input_ids) + self.pos(torch.arange(length))
        causal = nn.Transformer.generate_square_subsequent_mask(length)
        logits = self.lm_head(self.blocks(h, mask=causal, is_causal=True))
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1), ignore_index=-100)
        return {"loss": loss, "logits": logits}


def run(fixed=False, monitor=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    train, test = make_sequences(2048, rng), make_sequences(256, rng)
    model = TinyCausalLM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

    mon = gradhunt.Monitor(model, optimizer=opt) if monitor else None
    report = None
    try:
        model.train()
        for step in range(150):
            batch = collate([train[(step * 32 + j) % len(train)] for j in range(32)], fixed)
            out = model(**batch)
            out["loss"].backward()
            opt.step()
            opt.zero_grad()
            if mon is not None:
                mon.step(out["loss"])
        if mon is not None:
            report = mon.report()
    finally:
        if mon is not None:
            mon.close()

    model.eval()
    batch = collate(test, True)
    with torch.no_grad():
        pred = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])["logits"]
    target = batch["input_ids"][:, 1:]
    real = batch["attention_mask"][:, 1:] == 1
    metric = (pred[:, :-1].argmax(-1)[real] == target[real]).float().mean().item()
    return {"report": report, "metric": metric, "higher_is_better": True}
