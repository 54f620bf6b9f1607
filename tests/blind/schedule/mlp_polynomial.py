"""Tabular MLP classifier with LayerNorm, SGD + Nesterov, PolynomialLR(total_iters=epochs) per batch.

PolynomialLR(total_iters=EPOCHS, power=2) is meant to decay the rate to 0 over the 15 epochs of
the run. The buggy loop steps it after every batch, so it reaches 0 after 15 of the 375
optimizer steps (25 batches per epoch): the rate is exactly 0 from step 15 on and the model
stays at what 15 small steps made of it. The fixed twin steps the scheduler once per epoch.

Measured (held-out accuracy, higher is better): buggy 0.699, fixed 0.846.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "LR_SCHEDULE_TOO_FAST"

FEATURES = 20
CLASSES = 4
N_TRAIN = 1600         # 25 batches of 64 per epoch
N_TEST = 800
EPOCHS = 15


def make_data(n, centers, gen):
    """Each class a mixture of 3 Gaussian clusters in 20 dimensions."""
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    cluster = torch.randint(0, 3, (n,), generator=gen)
    x = centers[y, cluster] + 0.9 * torch.randn(n, FEATURES, generator=gen)
    return x, y


def build_model():
    return nn.Sequential(
        nn.Linear(FEATURES, 64), nn.LayerNorm(64), nn.GELU(),
        nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU(),
        nn.Linear(64, CLASSES),
    )


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    centers = torch.randn(CLASSES, 3, FEATURES, generator=gen) * 0.6
    x_train, y_train = make_data(N_TRAIN, centers, gen)
    x_test, y_test = make_data(N_TEST, centers, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(2))

    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    scheduler = torch.optim.lr_scheduler.PolynomialLR(optimizer, total_iters=EPOCHS, power=2.0)
    criterion = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for epoch in range(EPOCHS):
        model.train()
        for features, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(features), labels)
            loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(loss)
            if not fixed:
                scheduler.step()        # bug: total_iters counts epochs
        if fixed:
            scheduler.step()            # fix: once per epoch

    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
