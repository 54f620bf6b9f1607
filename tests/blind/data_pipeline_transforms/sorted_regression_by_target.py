"""LABELS_SORTED: a regression dataset sorted by its target and loaded without shuffling.

Model family: MLP regressor with LayerNorm (8 standardised features -> 64 -> LayerNorm -> 64 ->
1), SGD with momentum 0.9, plain epoch loop. Idiom: the rows come from a table that was sorted
by price for inspection (``order = torch.argsort(y)``; ``x, y = x[order], y[order]``), wrapped
in a ``TensorDataset`` and loaded with ``DataLoader(..., batch_size=50, shuffle=False)``: every
epoch walks from the cheapest to the dearest rows, so each batch holds a narrow band of targets
and the model is dragged towards the band it saw last. The fixed twin loads the same sorted
table with ``shuffle=True`` (seeded generator). The test split is an unsorted held-out table.

Measured (held-out MSE, lower is better): 0.84 (buggy) vs 0.040 (fixed); target variance 1.30.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "LABELS_SORTED"


def _make(n, gen):
    x = torch.randn(n, 8, generator=gen)
    w = torch.tensor([0.8, -0.5, 0.4, 0.3, -0.3, 0.2, 0.1, 0.0])
    y = x @ w + 0.3 * torch.sin(2 * x[:, 0]) + 0.1 * torch.randn(n, generator=gen)
    return x, y.unsqueeze(1)


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    x, y = _make(2000, gen)
    order = torch.argsort(y[:, 0])                       # "sorted by price" for a look
    x, y = x[order], y[order]
    train = DataLoader(TensorDataset(x, y), batch_size=50, shuffle=fixed,   # BUG: shuffle=False
                       generator=torch.Generator().manual_seed(1))
    return dict(train=train, test=TensorDataset(*_make(500, gen)))


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.LayerNorm(64), nn.Linear(64, 64),
                          nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _epoch in range(5):
        for xb, yb in data["train"]:
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        x, y = data["test"].tensors
        mse = nn.functional.mse_loss(model(x), y).item()
    return dict(metric=mse, higher_is_better=False,
                evidence=f"held-out MSE on an unsorted table {mse:.4f} (target variance "
                         f"{y.var().item():.3f})")
