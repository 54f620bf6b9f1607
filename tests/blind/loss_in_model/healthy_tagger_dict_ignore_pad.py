"""Healthy: a GRU token tagger that returns a dict with its loss, -100 on the padding.

``model(tokens=..., lengths=..., labels=...)`` returns ``{"loss": ..., "logits": ...}``; the loss
inside forward is ``F.cross_entropy(..., ignore_index=-100)`` and the collate function sets the
labels at padding to -100, so only real tokens are scored. A DataLoader over a list of
variable-length sentences with epochs, Adam. Data: 40 word types, each with a tag of 5, except
8 ambiguous words whose tag is the previous word's tag (context needed). Metric: held-out
per-token accuracy on real tokens; measured without gradhunt 0.998.
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

EXPECTED = None
CAUSAL = False

WORDS, TAGS, PAD, BATCH, EPOCHS = 40, 5, 0, 32, 4


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(WORDS + 1, 32, padding_idx=PAD)
        self.gru = nn.GRU(32, 32, batch_first=True, bidirectional=True)
        self.head = nn.Linear(64, TAGS)

    def forward(self, tokens, lengths, labels=None):
        del lengths        # kept in the batch for the user's bookkeeping
        hidden, _ = self.gru(self.embed(tokens))
        logits = self.head(hidden)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, TAGS), labels.reshape(-1),
                                   ignore_index=-100)
        return {"loss": loss, "logits": logits}


def loss_fn(output, labels):
    """What a user hands gradhunt's tools: the loss the model computed."""
    return output["loss"]


def _sentences(n, generator):
    tag_of = torch.randint(0, TAGS, (WORDS + 1,), generator=torch.Generator().manual_seed(2))
    sentences = []
    for _ in range(n):
        size = int(torch.randint(4, 20, (), generator=generator))
        words = torch.randint(1, WORDS + 1, (size,), generator=generator)
        tags = tag_of[words].clone()
        for t in range(1, size):
            if words[t] > WORDS - 8:        # ambiguous words: the previous word's tag
                tags[t] = tags[t - 1]
        sentences.append((words, tags))
    return sentences


def _collate(rows):
    longest = max(len(words) for words, _ in rows)
    tokens = torch.full((len(rows), longest), PAD, dtype=torch.long)
    labels = torch.full((len(rows), longest), -100, dtype=torch.long)
    for i, (words, tags) in enumerate(rows):
        tokens[i, :len(words)] = words
        labels[i, :len(tags)] = tags
    lengths = torch.tensor([len(words) for words, _ in rows])
    return {"tokens": tokens, "lengths": lengths, "labels": labels}


def make(fixed=True):
    torch.manual_seed(0)
    return Tagger(), _collate(_sentences(BATCH, torch.Generator().manual_seed(1)))


def run(fixed=True, monitor=False):
    import gradhunt

    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    train, held_out = _sentences(BATCH * 25, generator), _sentences(200, generator)
    model = Tagger()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loader = DataLoader(train, batch_size=BATCH, shuffle=True, collate_fn=_collate,
                        generator=torch.Generator().manual_seed(3))
    mon = gradhunt.Monitor(model, optimizer, every=20) if monitor else None
    try:
        for _ in range(EPOCHS):
            model.train()
            for batch in loader:
                out = model(**batch)
                optimizer.zero_grad()
                out["loss"].backward()
                optimizer.step()
                if mon is not None:
                    mon.step(out["loss"])
    finally:
        if mon is not None:
            mon.close()
    model.eval()
    batch = _collate(held_out)
    with torch.no_grad():
        predicted = model(tokens=batch["tokens"], lengths=batch["lengths"])["logits"].argmax(-1)
    scored = batch["labels"] != -100
    accuracy = (predicted[scored] == batch["labels"][scored]).float().mean().item()
    return {"report": mon.report() if mon is not None else None, "metric": accuracy,
            "higher_is_better": True}
