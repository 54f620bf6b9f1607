"""Healthy: SimSiam on 2-view augmented vectors, a BatchNorm MLP, detach on purpose.

Points from 6 Gaussian clusters in 20 dimensions; two views by random masking and noise. The
loss is SimSiam's ``-cos(p1, z2.detach()) / 2 - cos(p2, z1.detach()) / 2``: the stop-gradient
on the projections is the method (without it the encoder collapses), not a bug. A train_step
function, SGD + momentum. Metric: held-out 1-nearest-neighbour accuracy of the projections.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = None
DIM, CLUSTERS = 20, 6


def _points(n, centers, gen):
    y = torch.randint(0, CLUSTERS, (n,), generator=gen)
    return centers[y] + 0.5 * torch.randn(n, DIM, generator=gen), y


def _view(x, gen):
    keep = (torch.rand(x.shape, generator=gen) > 0.2).float()
    return x * keep + 0.3 * torch.randn(x.shape, generator=gen)


class SimSiam(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(DIM, 64), nn.BatchNorm1d(64), nn.ReLU(),
                                     nn.Linear(64, 32), nn.BatchNorm1d(32))
        self.predictor = nn.Sequential(nn.Linear(32, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                       nn.Linear(16, 32))

    def forward(self, x):
        z = self.encoder(x)
        return z, self.predictor(z)


def train_step(model, x1, x2, optimizer):
    optimizer.zero_grad()
    z1, p1 = model(x1)
    z2, p2 = model(x2)
    loss = -(F.cosine_similarity(p1, z2.detach()).mean()
             + F.cosine_similarity(p2, z1.detach()).mean()) / 2
    loss.backward()
    optimizer.step()
    return loss


def run(*, fixed=True, monitor=False):
    gen = torch.Generator().manual_seed(9)
    centers = 2.0 * torch.randn(CLUSTERS, DIM, generator=gen)
    train_x, _ = _points(1024, centers, gen)
    bank_x, bank_y = _points(256, centers, gen)
    test_x, test_y = _points(256, centers, gen)
    torch.manual_seed(0)
    model = SimSiam()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    mon = None
    if monitor:
        import gradhunt
        mon = gradhunt.Monitor(model, optimizer=optimizer)
    try:
        for step in range(200):
            xb = train_x[torch.randint(0, len(train_x), (128,), generator=gen)]
            loss = train_step(model, _view(xb, gen), _view(xb, gen), optimizer)
            if mon is not None:
                mon.step(loss)
    finally:
        if mon is not None:
            mon.close()
    model.eval()
    with torch.no_grad():
        bank = F.normalize(model(bank_x)[0], dim=1)
        query = F.normalize(model(test_x)[0], dim=1)
        accuracy = (bank_y[(query @ bank.T).argmax(1)] == test_y).float().mean().item()
    return {"report": mon.report() if mon is not None else None,
            "metric": accuracy, "higher_is_better": True}
