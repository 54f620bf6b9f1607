"""Bag-of-embeddings text classifier, a ``train_step`` function, SGD + momentum + weight decay.

Documents are bags of token ids from a 500-word vocabulary; each of 5 topics prefers its own 40
words. The model is ``nn.EmbeddingBag(mode="mean")`` and a linear head. The buggy
``train_step`` runs ``loss.backward()``, then ``optimizer.zero_grad(set_to_none=False)`` (moved
there "to free the gradients early"), then clips and steps: every step applies a gradient of
zeros, so SGD's only effect is weight decay shrinking the random init towards zero. The fixed
twin calls ``optimizer.zero_grad(set_to_none=False)`` at the start of ``train_step``.

Measured (held-out accuracy, higher is better): buggy 0.250, fixed 0.890 (chance 0.2).
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "GRADIENTS_CLEARED_BEFORE_STEP"

VOCAB = 500
TOPICS = 5
DOC_LEN = 30
N_TRAIN = 1500
N_TEST = 500
BATCH = 50
EPOCHS = 4


def make_data(n, gen):
    y = torch.randint(0, TOPICS, (n,), generator=gen)
    background = torch.randint(0, VOCAB, (n, DOC_LEN), generator=gen)
    topical = y.unsqueeze(1) * 40 + torch.randint(0, 40, (n, DOC_LEN), generator=gen)
    use_topic = torch.rand(n, DOC_LEN, generator=gen) < 0.25
    return torch.where(use_topic, topical, background), y


class BagClassifier(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, dim, mode="mean")
        self.fc = nn.Linear(dim, TOPICS)

    def forward(self, tokens):
        return self.fc(self.bag(tokens))


def train_step(model, optimizer, batch, *, fixed):
    tokens, labels = batch
    if fixed:
        optimizer.zero_grad(set_to_none=False)   # fix: clear before the backward
    loss = nn.functional.cross_entropy(model(tokens), labels)
    loss.backward()
    if not fixed:
        optimizer.zero_grad(set_to_none=False)   # bug: wipes the fresh gradient
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
    optimizer.step()
    return loss


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(51)
    x_train, y_train = make_data(N_TRAIN, gen)
    x_test, y_test = make_data(N_TEST, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(52))

    model = BagClassifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=1e-4)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for epoch in range(EPOCHS):
        model.train()
        for batch in loader:
            loss = train_step(model, optimizer, batch, fixed=fixed)
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
