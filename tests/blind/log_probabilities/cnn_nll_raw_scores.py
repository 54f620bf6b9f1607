"""Small CNN on synthetic 12x12 glyphs, plain loop, Adam, ``F.nll_loss``.

Ten classes of noisy, randomly shifted stroke patterns. The model used to be trained with
``nn.CrossEntropyLoss``; someone switched the loop to ``F.nll_loss`` (to add class weights
later) and did not add the ``log_softmax``: the network ends in a plain ``nn.Linear``, so
``F.nll_loss(scores, y)`` is ``-scores[y]`` averaged, unbounded below. The loss goes negative and
keeps falling while the model inflates the target score; nothing pushes the other classes'
scores down. Fix: ``F.nll_loss(F.log_softmax(scores, dim=1), y)``.

Measured (held-out accuracy, higher is better, without gradhunt): see the folder docstring.
"""
import torch
from torch import nn
from torch.nn import functional as F

EXPECTED = "SCORES_AS_LOG_PROBABILITIES"

CLASSES = 10
SIZE = 12
STEPS = 200
BATCH = 64


def make_data(n, glyphs, gen):
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    images = torch.zeros(n, 1, SIZE, SIZE)
    shifts = torch.randint(0, 4, (n, 2), generator=gen)
    for i in range(n):
        r, c = shifts[i].tolist()
        images[i, 0, r:r + 8, c:c + 8] = glyphs[y[i]]
    images += 0.3 * torch.randn(n, 1, SIZE, SIZE, generator=gen)
    return images, y


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
        nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(3)
    glyphs = (torch.rand(CLASSES, 8, 8, generator=gen) < 0.35).float()
    x_train, y_train = make_data(2000, glyphs, gen)
    x_test, y_test = make_data(500, glyphs, gen)

    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer)

    batches = torch.Generator().manual_seed(4)
    model.train()
    for step in range(STEPS):
        idx = torch.randint(0, len(x_train), (BATCH,), generator=batches)
        scores = model(x_train[idx])
        if fixed:
            loss = F.nll_loss(F.log_softmax(scores, dim=1), y_train[idx])   # fix
        else:
            loss = F.nll_loss(scores, y_train[idx])       # bug: raw scores, no log_softmax
        optimizer.zero_grad()
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
