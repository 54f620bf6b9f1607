"""preflight on a 0.93M-parameter causal transformer LM, with the user's train_step (AdamW,
gradient clipping) and ``causal=True``: its time against one call of that train_step, measured
in the same run.

The LM (embedding 512 x 128, learned positions, 6 pre-norm encoder blocks with a causal mask,
4 heads, feed-forward 256, dropout 0.1) sees one batch of 16 sequences of 64 tokens, next-token
targets, drawn from a small random bigram table (each token has 4 likely successors: a batch a
model can memorise, as real text is). The figure is the ratio of preflight's wall time to one
train_step's (the median of ``--repeats``); the overfit item's steps are printed, as it takes
most of the time. torch runs on ``--threads`` threads.

    python benchmarks/preflight_cost.py [--threads 2] [--repeats 5]
"""
import argparse
import re
import statistics
import time

import torch
from torch import nn
from torch.nn import functional as F

from diagnostics import preflight

VOCAB, WIDTH, LAYERS, HEADS, FEED, CONTEXT = 512, 128, 6, 4, 256, 64
BATCH = 16


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, WIDTH)
        self.positions = nn.Parameter(torch.zeros(CONTEXT, WIDTH))
        block = nn.TransformerEncoderLayer(WIDTH, HEADS, FEED, dropout=0.1, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(block, LAYERS, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, ids):
        length = ids.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(length)
        hidden = self.tokens(ids) + self.positions[:length]
        return self.head(self.norm(self.blocks(hidden, mask=mask, is_causal=True)))


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def train_step(model, batch, optimizer):
    inputs, targets = batch
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


def bigram_batch(generator):
    """Sequences from a random bigram table: each token is followed by one of 4 tokens."""
    successors = torch.randint(0, VOCAB, (VOCAB, 4), generator=generator)
    rows = [torch.randint(0, VOCAB, (BATCH,), generator=generator)]
    for _ in range(CONTEXT):
        pick = torch.randint(0, 4, (BATCH,), generator=generator)
        rows.append(successors[rows[-1], pick])
    tokens = torch.stack(rows, dim=1)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def timed(function, repeats):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    inputs, targets = bigram_batch(torch.Generator().manual_seed(1))
    size = sum(p.numel() for p in model.parameters())
    copy = TinyLM()                                    # the step timed on a twin: the model
    copy.load_state_dict(model.state_dict())           # preflight checks stays untouched
    twin_optimizer = torch.optim.AdamW(copy.parameters(), lr=1e-3)
    train_step(copy, (inputs, targets), twin_optimizer)     # warm-up
    step_time, _ = timed(lambda: train_step(copy, (inputs, targets), twin_optimizer),
                         args.repeats)
    start = time.perf_counter()
    report = preflight(model, loss_fn, inputs, targets, optimizer=optimizer,
                       train_step=train_step, causal=True)
    preflight_time = time.perf_counter() - start
    overfit = report.item("overfit one batch")
    steps = re.search(r"(?:stopped at step|PASSED in|after) (\d+)", overfit.summary)
    print(f"transformer LM {size:,} parameters, batch {BATCH} x {CONTEXT} tokens, "
          f"{args.threads} torch thread(s)")
    print(f"one train_step: {step_time:.3f} s (median of {args.repeats})")
    print(f"preflight: {preflight_time:.1f} s, {report.verdict}")
    print(f"overfit one batch: {overfit.status} in {steps.group(1) if steps else '?'} of the "
          f"user's steps: {overfit.summary}")
    print(f"{preflight_time / step_time:.1f}")


if __name__ == "__main__":
    main()
