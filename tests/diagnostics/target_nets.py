"""Small training programs for the target checks (IGNORED_CLASS, PADDING_SCORED, LABEL_RANGE
per element): a tagger over padded sentences and a segmentation CNN over rectangles, with the
target idiom under test chosen by the caller."""
import torch
from torch import nn

from diagnostics import Monitor

WORDS, TAGS = 40, 5


def sentences(rows, *, generator, low=4, high=12, length=16):
    """Word ids (rows, length) right-padded with 0, tags (rows, length) padded with -1 (the
    caller maps the padding), the real lengths; tag 0 ("O") is the commonest and occurs between
    entities."""
    words = torch.zeros(rows, length, dtype=torch.long)
    tags = torch.full((rows, length), -1, dtype=torch.long)
    lengths = torch.randint(low, high + 1, (rows,), generator=generator)
    for i, n in enumerate(lengths.tolist()):
        w = torch.randint(1, WORDS, (n,), generator=generator)
        words[i, :n] = w
        tags[i, :n] = torch.where(w % 3 == 0, 1 + w % (TAGS - 1), torch.zeros_like(w))
    return words, tags, lengths


class Tagger(nn.Module):
    def __init__(self, tags=TAGS, vocab=WORDS):
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.head = nn.Linear(16, tags)

    def forward(self, words):
        return self.head(torch.tanh(self.embed(words)))


def train_tagger(loss_of, *, tags=TAGS, steps=120, every=None, batches=None):
    """Monitor report of a tagger trained with ``loss_of(logits, tags, lengths)``."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = Tagger(tags)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    options = {} if every is None else {"every": every}
    with Monitor(model, optimizer, **options) as monitor:
        for _ in range(steps):
            words, labels, lengths = (batches() if batches is not None
                                      else sentences(16, generator=generator))
            optimizer.zero_grad()
            loss = loss_of(model(words), labels, lengths)
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    return monitor.report()


def scenes(n, *, generator, classes=4, size=12):
    """Images (n, 3, size, size) and masks (n, size, size): two or three rectangles of classes
    1..classes-1 on a background of class 0."""
    images = torch.randn(n, 3, size, size, generator=generator) * 0.3
    masks = torch.zeros(n, size, size, dtype=torch.long)
    for i in range(n):
        for _ in range(int(torch.randint(2, 4, (1,), generator=generator))):
            c = int(torch.randint(1, classes, (1,), generator=generator))
            h, w = torch.randint(2, 5, (2,), generator=generator).tolist()
            top, left = torch.randint(0, size - 4, (2,), generator=generator).tolist()
            masks[i, top:top + h, left:left + w] = c
    for c in range(1, classes):
        images[:, (c - 1) % 3][masks == c] += 1.0
    return images, masks


def train_segmenter(loss_of, *, classes=4, steps=60, masks_of=None):
    """Monitor report of a small CNN trained with ``loss_of(logits, masks)``; ``masks_of``
    maps the true masks first."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, classes, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with Monitor(model, optimizer, every=10) as monitor:
        for _ in range(steps):
            x, y = scenes(8, generator=generator, classes=classes)
            if masks_of is not None:
                y = masks_of(y)
            optimizer.zero_grad()
            loss = loss_of(model(x), y)
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    return monitor.report()


def alarms(report):
    return [f.code for f in report.findings if f.severity in ("warning", "error")]


def codes(report):
    return [f.code for f in report.findings]
