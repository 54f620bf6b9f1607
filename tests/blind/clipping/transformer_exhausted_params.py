"""Small transformer encoder classifying token sequences; a Trainer class clips a used-up generator.

Sequences of 16 tokens (vocabulary 24); the class is which of 4 marker tokens is planted most
often among random filler. A 2-layer ``nn.TransformerEncoder`` (d_model 32, 4 heads) with mean
pooling is trained by a small ``Trainer`` class with SGD + momentum at lr 0.3 and
``clip_grad_norm_(self.params, 1.0)``. The buggy Trainer stores ``self.params =
model.parameters()``, a generator: the optimizer's constructor consumes it, so every later
``clip_grad_norm_(self.params, ...)`` sees no tensor, returns 0 and clips nothing. The fixed twin
stores ``list(model.parameters())``.

Measured without gradhunt (held-out accuracy, higher is better; chance 0.25): buggy 0.258,
fixed 0.965. (torch itself warns once per call that the generator is empty.)
"""
import torch
from torch import nn

EXPECTED = "CLIP_HAS_NO_EFFECT"

VOCAB = 24
MARKERS = 4             # tokens 1..4 are the markers; 5.. are filler
SEQ_LEN = 16
D_MODEL = 32
STEPS = 240
BATCH = 32
LR = 0.3
MAX_NORM = 1.0


def make_data(n, gen):
    x = torch.randint(MARKERS + 1, VOCAB, (n, SEQ_LEN), generator=gen)
    positions = torch.rand(n, SEQ_LEN, generator=gen).argsort(1)
    planted = torch.randint(0, MARKERS, (n, 1), generator=gen) + 1
    distractors = torch.randint(0, MARKERS, (n, 2), generator=gen) + 1
    markers = torch.cat([planted.expand(n, 3), distractors], 1)     # 3 of the class, 2 others
    x.scatter_(1, positions[:, :5], markers)
    counts = torch.stack([(x == k).sum(1) for k in range(1, MARKERS + 1)], 1)
    return x, counts.argmax(1)                 # the most frequent marker (the planted one)


class SequenceClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Parameter(torch.randn(SEQ_LEN, D_MODEL) * 0.1)
        layer = nn.TransformerEncoderLayer(D_MODEL, nhead=4, dim_feedforward=64, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(D_MODEL, MARKERS)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens) + self.pos)
        return self.head(h.mean(1))


class Trainer:
    def __init__(self, model, *, lr, max_norm, fixed):
        self.model = model
        if fixed:
            self.params = list(model.parameters())   # fix: a list can be iterated again
        else:
            self.params = model.parameters()         # bug: a generator, used up by the optimizer
        self.optimizer = torch.optim.SGD(self.params, lr=lr, momentum=0.9)
        self.max_norm = max_norm
        self.criterion = nn.CrossEntropyLoss()

    def training_step(self, tokens, labels):
        self.optimizer.zero_grad()
        loss = self.criterion(self.model(tokens), labels)
        loss.backward()
        nn.utils.clip_grad_norm_(self.params, self.max_norm)
        self.optimizer.step()
        return loss

    def fit(self, x, y, *, steps, batch_size, gen, monitor=None):
        self.model.train()
        for step in range(steps):
            idx = torch.randint(0, len(x), (batch_size,), generator=gen)
            loss = self.training_step(x[idx], y[idx])
            if monitor is not None:
                monitor.step(loss)

    @torch.no_grad()
    def accuracy(self, x, y):
        self.model.eval()
        logits = self.model(x)
        if not torch.isfinite(logits).all():     # a NaN model predicts nothing: chance
            return 1.0 / MARKERS
        return (logits.argmax(1) == y).float().mean().item()


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    x_train, y_train = make_data(2048, gen)
    x_test, y_test = make_data(512, gen)

    model = SequenceClassifier()
    trainer = Trainer(model, lr=LR, max_norm=MAX_NORM, fixed=fixed)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=trainer.optimizer)
    trainer.fit(x_train, y_train, steps=STEPS, batch_size=BATCH,
                gen=torch.Generator().manual_seed(2), monitor=mon)
    accuracy = trainer.accuracy(x_test, y_test)
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
