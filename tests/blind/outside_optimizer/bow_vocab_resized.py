"""Bag-of-words topic classifier (EmbeddingBag + Linear), plain loop, Adam, vocab resized late.

The program builds the model for the corpus vocabulary and its Adam optimizer, then adds the
special tokens (``<pad>``, ``<unk>``, ``<sep>``) to the vocabulary and resizes the embedding
table: ``model.resize_vocab(n)`` builds a new ``nn.EmbeddingBag`` and copies the old rows into
it. The buggy program resizes *after* the optimizer was built, so the new table is in no
optimizer: it gets a gradient every step but stays at its random init (and, since the loop
clears with ``optimizer.zero_grad()``, its ``.grad`` is never cleared and piles up). Only the
16 -> 4 output layer learns, on a random 16-dimensional projection of the bag of words. The
fixed twin resizes the vocabulary first and builds the optimizer from the complete model.

Measured (held-out accuracy, higher is better, chance 0.25): buggy 0.59, fixed 0.99.
"""
import torch
from torch import nn

EXPECTED = "PARAMS_NOT_IN_OPTIMIZER"

CORPUS_VOCAB = 400
SPECIALS = 3
TOPICS = 4
DOC_LEN = 24
STEPS = 300
BATCH = 64


def make_docs(n, topic_words, gen):
    """Documents of DOC_LEN tokens: half from the topic's 30 keywords, half background words."""
    y = torch.randint(0, TOPICS, (n,), generator=gen)
    keywords = topic_words[y][:, torch.randint(0, topic_words.shape[1], (DOC_LEN // 2,),
                                               generator=gen)]
    background = torch.randint(SPECIALS, CORPUS_VOCAB + SPECIALS, (n, DOC_LEN - DOC_LEN // 2),
                               generator=gen)
    tokens = torch.cat([keywords, background], 1)
    return tokens, y


class BagOfWords(nn.Module):
    def __init__(self, vocab_size, dim=16, classes=TOPICS):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.classifier = nn.Linear(dim, classes)

    def resize_vocab(self, vocab_size):
        old = self.embedding
        self.embedding = nn.EmbeddingBag(vocab_size, old.embedding_dim, mode="mean")
        with torch.no_grad():
            self.embedding.weight[:old.num_embeddings] = old.weight

    def forward(self, tokens):
        return self.classifier(self.embedding(tokens))


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(3)
    topic_words = torch.randperm(CORPUS_VOCAB, generator=gen)[:TOPICS * 30].view(TOPICS, 30)
    topic_words = topic_words + SPECIALS
    x_train, y_train = make_docs(2048, topic_words, gen)
    x_test, y_test = make_docs(1024, topic_words, gen)

    model = BagOfWords(CORPUS_VOCAB)
    if fixed:
        model.resize_vocab(CORPUS_VOCAB + SPECIALS)    # fix: the model is complete first
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
        model.resize_vocab(CORPUS_VOCAB + SPECIALS)    # bug: a new table the optimizer never saw
    loss_fn = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    batches = torch.randint(0, len(x_train), (STEPS, BATCH), generator=gen)
    for idx in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(x_train[idx]), y_train[idx])
        loss.backward()
        optimizer.step()
        if mon is not None:
            mon.step(loss)

    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
