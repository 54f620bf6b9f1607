"""The README's tour 3c: gradient accumulation that averages per-micro-batch token means.

A tiny language model, padded batches (-100 labels), 4 micro-batches: each micro-batch's
token-mean loss divided by 4, where the whole batch's token-mean loss is the objective (the
bug of trl#2175, fixed in transformers PR #34191)."""
import torch
import torch.nn.functional as F

import gradhunt

VOCAB, MICRO = 50, 4
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, VOCAB))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = torch.randint(0, VOCAB, (16, 12))
labels = tokens.roll(-1, dims=1)
lengths = torch.tensor([12, 11, 12, 10, 9, 7, 8, 6, 5, 4, 5, 3, 3, 2, 2, 1])   # sorted by length
labels[torch.arange(12) >= lengths[:, None]] = -100


def loss_fn(logits, targets):      # the objective: the mean over every scored token
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-100)


def train_step(model, batch, optimizer):
    inputs, targets = batch
    optimizer.zero_grad()
    for x, y in zip(inputs.chunk(MICRO), targets.chunk(MICRO)):
        (loss_fn(model(x), y) / MICRO).backward()       # each micro-batch's mean, weighted 1/4
    optimizer.step()


print(gradhunt.check_step_equivalence(model, loss_fn, tokens, labels, train_step=train_step,
                                      optimizer=optimizer))
