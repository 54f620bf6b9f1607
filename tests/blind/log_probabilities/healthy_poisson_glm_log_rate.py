"""HEALTHY: a Poisson GLM-style count model whose output is a log-rate (a plain ``nn.Linear``
head, any real value), trained with ``nn.PoissonNLLLoss()`` and its default
``log_input=True``: log-rates where the loss expects log-rates. The rate is ``exp`` of the
output at evaluation. Embedding of the region plus numeric features; a DataLoader with epochs,
SGD, batch 100. Must raise no warning or error.

Measured (held-out mean absolute error of the rate, without gradhunt): see the folder docstring.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

REGIONS = 12
FEATURES = 5
EPOCHS = 6


class CountModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.region = nn.Embedding(REGIONS, 4)
        self.head = nn.Linear(FEATURES + 4, 1)

    def forward(self, region, x):
        return self.head(torch.cat([self.region(region), x], 1)).squeeze(-1)   # log-rate


def make_data(n, offsets, weights, gen):
    region = torch.randint(0, REGIONS, (n,), generator=gen)
    x = torch.randn(n, FEATURES, generator=gen)
    rate = torch.exp(offsets[region] + x @ weights)
    return region, x, torch.poisson(rate, generator=gen), rate


def run(*, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(19)
    offsets = 0.5 + 0.8 * torch.randn(REGIONS, generator=gen)
    weights = 0.3 * torch.randn(FEATURES, generator=gen)
    region, x, counts, _ = make_data(4000, offsets, weights, gen)
    r_test, x_test, _, rate_test = make_data(1000, offsets, weights, gen)
    loader = DataLoader(TensorDataset(region, x, counts), batch_size=100, shuffle=True,
                        generator=torch.Generator().manual_seed(20))

    model = CountModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    criterion = nn.PoissonNLLLoss()
    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer)

    for _ in range(EPOCHS):
        model.train()
        for r, xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(r, xb), yb)
            loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(loss)

    model.eval()
    with torch.no_grad():
        mae = (model(r_test, x_test).exp() - rate_test).abs().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": mae, "higher_is_better": False}
