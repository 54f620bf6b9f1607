"""A GRU language model whose forward scores logits[t] against labels[t] (no shift).

The model follows the Hugging Face convention: ``model(input_ids, labels=input_ids)`` returns a
ModelOutput-like dataclass with ``.loss`` computed inside forward and ``.logits``; the loop is a
plain ``for`` loop with Adam calling ``out.loss.backward()``. The bug: forward compares
``logits[:, t]`` with ``labels[:, t]``, the token the GRU has just read, instead of shifting
(``logits[:, :-1]`` against ``labels[:, 1:]``). The training loss falls to nearly zero because
the model learns to copy its input, and it never learns to predict the next token.

Data: sequences from a Markov chain over 16 tokens whose next token is a fixed successor of the
current one with probability 0.85. Metric: next-token accuracy on held-out sequences (the
model's argmax at position t against token t + 1); measured without gradhunt,
buggy 0.010 -> fixed 0.858.
"""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

EXPECTED = "TARGETS_MISALIGNED"
CAUSAL = True

VOCAB, LENGTH, BATCH, STEPS = 16, 24, 32, 150


@dataclass
class CausalLMOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor


class GRULanguageModel(nn.Module):
    def __init__(self, vocab=VOCAB, dim=32, *, shift=True):
        super().__init__()
        self.shift = shift
        self.embed = nn.Embedding(vocab, dim)
        self.gru = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, input_ids, labels=None):
        hidden, _ = self.gru(self.embed(input_ids))
        logits = self.head(hidden)
        loss = None
        if labels is not None:
            if self.shift:
                scored, targets = logits[:, :-1], labels[:, 1:]
            else:                       # bug: position t is scored against the token it read
                scored, targets = logits, labels
            loss = F.cross_entropy(scored.reshape(-1, scored.size(-1)), targets.reshape(-1))
        return CausalLMOutput(loss=loss, logits=logits)


def loss_fn(output, labels):
    """What a user hands gradhunt's tools: the loss the model computed."""
    return output.loss


def _sequences(n, generator):
    successor = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(7))
    tokens = torch.empty(n, LENGTH, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, VOCAB, (n,), generator=generator)
    for t in range(1, LENGTH):
        follow = torch.rand(n, generator=generator) < 0.85
        noise = torch.randint(0, VOCAB, (n,), generator=generator)
        tokens[:, t] = torch.where(follow, successor[tokens[:, t - 1]], noise)
    return tokens


def make(fixed=False):
    torch.manual_seed(0)
    model = GRULanguageModel(shift=fixed)
    tokens = _sequences(BATCH, torch.Generator().manual_seed(1))
    return model, {"input_ids": tokens, "labels": tokens.clone()}


def run(fixed=False, monitor=False):
    import gradhunt

    torch.manual_seed(0)
    model = GRULanguageModel(shift=fixed)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(1)
    train = _sequences(BATCH * 40, generator)
    held_out = _sequences(256, generator)
    mon = gradhunt.Monitor(model, optimizer, every=25) if monitor else None
    try:
        for step in range(STEPS):
            rows = torch.randint(0, len(train), (BATCH,), generator=generator)
            batch = train[rows]
            out = model(input_ids=batch, labels=batch)
            optimizer.zero_grad()
            out.loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(out.loss)
    finally:
        if mon is not None:
            mon.close()
    model.eval()
    with torch.no_grad():
        predicted = model(input_ids=held_out).logits[:, :-1].argmax(-1)
    accuracy = (predicted == held_out[:, 1:]).float().mean().item()
    return {"report": mon.report() if mon is not None else None, "metric": accuracy,
            "higher_is_better": True}
