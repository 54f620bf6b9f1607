"""EmbeddingBag text classifier trained with a DataLoader over epochs; clips its EMA copy.

Bag-of-words topic classification: 6 topics, each with its own distribution over a vocabulary
of 400 tokens; documents are 24 tokens. The model is ``nn.EmbeddingBag`` (mean) + a 2-layer
MLP, trained with plain SGD at lr 10 and ``clip_grad_norm_(..., max_norm=0.1)`` (the recipe of
the torchtext classification tutorial, lr 5 and 0.1, a notch hotter). The script keeps an
exponential moving average of the weights, ``ema_model = copy.deepcopy(model)``, updated after
each step and used for evaluation.
The buggy loop clips ``ema_model.parameters()``: that copy has no gradients (it is never
backpropagated), so the clip sees no tensor and the model's own gradients reach
``optimizer.step()`` unclipped; the run diverges. The fixed twin clips ``model.parameters()``.

Measured without gradhunt (held-out accuracy of the EMA model, higher is better; chance 0.167;
a NaN model is scored as chance): buggy 0.210, fixed 0.988.
"""
import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "CLIP_HAS_NO_EFFECT"

VOCAB = 400
TOPICS = 6
DOC_LEN = 24
EMBED = 32
EPOCHS = 6
BATCH = 48
LR = 10.0
MAX_NORM = 0.1
EMA_DECAY = 0.9


def make_data(n, topic_logits, gen):
    y = torch.randint(0, TOPICS, (n,), generator=gen)
    probs = torch.softmax(topic_logits[y], dim=1)
    x = torch.multinomial(probs, DOC_LEN, replacement=True, generator=gen)
    return x, y


class BagOfWords(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, EMBED, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(EMBED, 64), nn.ReLU(), nn.Linear(64, TOPICS))

    def forward(self, tokens):
        return self.mlp(self.embed(tokens))


@torch.no_grad()
def update_ema(ema_model, model, decay):
    for ema_p, p in zip(ema_model.parameters(), model.parameters()):
        ema_p.mul_(decay).add_(p, alpha=1 - decay)


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    topic_logits = 1.5 * torch.randn(TOPICS, VOCAB, generator=gen)
    x_train, y_train = make_data(1920, topic_logits, gen)
    x_test, y_test = make_data(600, topic_logits, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(2))

    model = BagOfWords()
    ema_model = copy.deepcopy(model)
    for p in ema_model.parameters():
        p.requires_grad_(False)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    criterion = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for epoch in range(EPOCHS):
        model.train()
        for tokens, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(tokens), labels)
            loss.backward()
            if fixed:
                nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)       # fix
            else:
                nn.utils.clip_grad_norm_(ema_model.parameters(), MAX_NORM)   # bug: the copy
            optimizer.step()
            update_ema(ema_model, model, EMA_DECAY)
            if mon is not None:
                mon.step(loss)

    ema_model.eval()
    with torch.no_grad():
        logits = ema_model(x_test)
    if torch.isfinite(logits).all():
        accuracy = (logits.argmax(1) == y_test).float().mean().item()
    else:                                  # a NaN model predicts nothing: chance
        accuracy = 1.0 / TOPICS
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
