"""Embedding model for tabular rating prediction, one table per field built by list repetition.

Ten categorical fields (hashed into the same 64 buckets each, as a click/rating pipeline does),
one ``nn.Embedding`` per field, the field vectors concatenated into an MLP that predicts a
rating. The tables are built as ``nn.ModuleList([nn.Embedding(BUCKETS, DIM)] * FIELDS)``: the
list repetition copies the reference, so all ten fields look up ONE table, and bucket 7 of
"city" is the same vector as bucket 7 of "device". The fixed twin builds a fresh table per field
with a list comprehension. Trained over a DataLoader with epochs, AdamW, batch 256.

Measured (held-out MSE, lower is better; the noise alone scores 0.01, predicting the mean
scores ~1.0): buggy 0.658, fixed 0.229.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "MODULE_REUSED"

FIELDS = 10
BUCKETS = 64
DIM = 8
N_TRAIN = 8192
N_TEST = 2048
EPOCHS = 8
BATCH = 256


def make_data(n, effects, gen):
    codes = torch.randint(0, BUCKETS, (n, FIELDS), generator=gen)
    y = effects[torch.arange(FIELDS), codes].sum(1)         # each field's own effect per bucket
    return codes, y + 0.1 * torch.randn(n, generator=gen)


class RatingModel(nn.Module):
    def __init__(self, *, fixed):
        super().__init__()
        if fixed:
            self.tables = nn.ModuleList([nn.Embedding(BUCKETS, DIM) for _ in range(FIELDS)])
        else:
            # bug: [module] * n repeats one reference: ten fields, one table
            self.tables = nn.ModuleList([nn.Embedding(BUCKETS, DIM)] * FIELDS)
        self.mlp = nn.Sequential(
            nn.Linear(FIELDS * DIM, 128), nn.ReLU(),
            nn.Linear(128, 64), nn.ReLU(),
            nn.Linear(64, 1),
        )

    def forward(self, codes):
        vectors = [table(codes[:, i]) for i, table in enumerate(self.tables)]
        return self.mlp(torch.cat(vectors, dim=1)).squeeze(1)


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    effects = torch.randn(FIELDS, BUCKETS, generator=gen) / FIELDS ** 0.5
    x_train, y_train = make_data(N_TRAIN, effects, gen)
    x_test, y_test = make_data(N_TEST, effects, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(2))

    model = RatingModel(fixed=fixed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    loss_fn = nn.MSELoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for epoch in range(EPOCHS):
        model.train()
        for codes, target in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(codes), target)
            loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(loss)

    model.eval()
    with torch.no_grad():
        mse = loss_fn(model(x_test), y_test).item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": mse, "higher_is_better": False}
