"""Bag-of-words text classifier (EmbeddingBag), RMSprop, ExponentialLR(gamma=0.95) per batch.

The loop is a ``while`` over a step budget that pulls batches from an iterator and restarts it
at each epoch's end. ExponentialLR(gamma=0.95) is the usual per-epoch decay (the rate halves in
~14 epochs); the buggy loop steps it after every batch, so the rate halves every 14 *batches*,
is below 1e-3 of its start by step 135 and ~1e-13 at the end of the 600-step budget: the model
is trained on the first ~20 batches' worth of learning rate. The fixed twin steps the
scheduler when the iterator runs out, once per epoch.

Measured (held-out accuracy, higher is better): buggy 0.305 (chance 0.2), fixed 0.666.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "LR_SCHEDULE_TOO_FAST"

VOCAB = 3000
CLASSES = 5
DOC_LEN = 40
N_TRAIN = 1600         # 50 batches of 32 per epoch
N_TEST = 800
MAX_STEPS = 600        # 12 epochs


def make_data(n, keywords, gen):
    """Documents of random words with a few of their class's keywords mixed in."""
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    docs = torch.randint(0, VOCAB, (n, DOC_LEN), generator=gen)
    k = keywords.shape[1]
    picks = keywords[y.unsqueeze(1), torch.randint(0, k, (n, 4), generator=gen)]
    docs[:, :4] = picks
    return docs, y


class BagOfWords(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, dim, mode="mean")
        self.classifier = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, CLASSES))

    def forward(self, docs):
        return self.classifier(self.embed(docs))


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    keywords = torch.randperm(VOCAB, generator=gen)[: CLASSES * 60].view(CLASSES, 60)
    x_train, y_train = make_data(N_TRAIN, keywords, gen)
    x_test, y_test = make_data(N_TEST, keywords, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(2))

    model = BagOfWords()
    optimizer = torch.optim.RMSprop(model.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.95)
    criterion = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    model.train()
    batches = iter(loader)
    step = 0
    while step < MAX_STEPS:
        try:
            docs, labels = next(batches)
        except StopIteration:           # end of an epoch
            if fixed:
                scheduler.step()        # fix: once per epoch
            batches = iter(loader)
            docs, labels = next(batches)
        optimizer.zero_grad()
        loss = criterion(model(docs), labels)
        loss.backward()
        optimizer.step()
        if not fixed:
            scheduler.step()            # bug: a per-epoch decay stepped every batch
        if mon is not None:
            mon.step(loss)
        step += 1

    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
