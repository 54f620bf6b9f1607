"""Self-training CNN with sharpened soft pseudo-labels, a train_step function, SGD + momentum.

Synthetic 1x12x12 images of four stroke shapes (horizontal, vertical, two diagonals) at random
offsets under heavy noise; 24 labelled images and 768 unlabelled ones. Each step adds to the
labelled cross-entropy a pseudo-label term: the prediction on a shifted, re-noised view of an
unlabelled batch is trained towards the model's own sharpened prediction (temperature 0.5) on
the clean view.

Bug (kind 1, a target that carries gradient): the pseudo-label ``softmax(model(x_u) / T)`` is
computed by the trained model in the same step without ``no_grad``/``.detach()``, so the term
also trains the target: it moves the clean view's prediction towards the noisy view's and
sharpens it on its own. Fix: compute the pseudo-label under ``torch.no_grad()``.

Measured without gradhunt (seeded): held-out accuracy buggy 0.301 -> fixed 0.529
(the labelled images alone give 0.516: the buggy term does harm, the fixed one none).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = "TARGET_CARRIES_GRADIENT"

SIDE = 12
TEMPERATURE = 0.5
WEIGHT = 1.0
STEPS = 150


def _images(n, gen):
    y = torch.randint(0, 4, (n,), generator=gen)
    x = torch.zeros(n, 1, SIDE, SIDE)
    off = torch.randint(2, SIDE - 2, (n, 2), generator=gen)
    idx = torch.arange(-2, 3)
    for i in range(n):
        r, c = off[i].tolist()
        if y[i] == 0:
            x[i, 0, r, c + idx] = 1.0
        elif y[i] == 1:
            x[i, 0, r + idx, c] = 1.0
        elif y[i] == 2:
            x[i, 0, r + idx, c + idx] = 1.0
        else:
            x[i, 0, r + idx, c - idx] = 1.0
    return x + 0.6 * torch.randn(x.shape, generator=gen), y


def _view(x, gen):
    shift = torch.randint(-1, 2, (2,), generator=gen).tolist()
    return torch.roll(x, shifts=shift, dims=(2, 3)) + 0.3 * torch.randn(x.shape, generator=gen)


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(1),
        nn.Flatten(), nn.Linear(32, 4))


def train_step(model, batch, optimizer, *, fixed, gen):
    x_l, y_l, x_u = batch
    optimizer.zero_grad()
    supervised = F.cross_entropy(model(x_l), y_l)
    if fixed:
        with torch.no_grad():
            pseudo = F.softmax(model(x_u) / TEMPERATURE, dim=1)
    else:
        pseudo = F.softmax(model(x_u) / TEMPERATURE, dim=1)
    student = F.log_softmax(model(_view(x_u, gen)), dim=1)
    unsupervised = -(pseudo * student).sum(1).mean()
    loss = supervised + WEIGHT * unsupervised
    loss.backward()
    optimizer.step()
    return loss


def run(*, fixed, monitor=False):
    gen = torch.Generator().manual_seed(3)
    x_l, y_l = _images(24, gen)
    x_u, _ = _images(768, gen)
    x_test, y_test = _images(512, gen)
    torch.manual_seed(0)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    mon = None
    if monitor:
        import gradhunt
        mon = gradhunt.Monitor(model, optimizer=optimizer)
    try:
        for step in range(STEPS):
            u = torch.randint(0, len(x_u), (64,), generator=gen)
            loss = train_step(model, (x_l, y_l, x_u[u]), optimizer, fixed=fixed, gen=gen)
            if mon is not None:
                mon.step(loss)
    finally:
        if mon is not None:
            mon.close()
    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    return {"report": mon.report() if mon is not None else None,
            "metric": accuracy, "higher_is_better": True}
