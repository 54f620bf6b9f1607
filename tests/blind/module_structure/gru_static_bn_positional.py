"""GRU over short vital-sign series plus BatchNorm'd static covariates, momentum passed by position.

Each patient has a 12-step series of two vital signs (read by a GRU) and eight static lab
values (log-normal: most small, a few very large) that go through a BatchNorm'd MLP; both are
fused to predict a risk score. The normalization layers are written
``nn.BatchNorm1d(n, 1e-3, 0.9)`` as ``(num_features, eps, momentum)``, copying Keras'
``BatchNormalization(momentum=0.9, epsilon=1e-3)``. Keras keeps 90% of the running statistics;
PyTorch's third argument takes 90% from the current batch, so ``model.eval()`` scores every
patient with the statistics of the last batch (1000 patients in batches of 16, the last has 8).
The fixed twin passes ``1 - 0.9`` (0.1, PyTorch's default). A ``train_step`` function over a
DataLoader, RMSprop, batch 16.

Measured (held-out MSE in eval mode, lower is better; the noise alone scores 0.01): buggy
1.826, fixed 0.264.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "BATCHNORM_MOMENTUM_INVERTED"

STEPS = 12
VITALS = 2
LABS = 8
N_TRAIN = 1000
N_TEST = 1000
EPOCHS = 6
BATCH = 16
KERAS_MOMENTUM = 0.9


def make_data(n, w_lab, v_lab, w_seq, gen):
    series = torch.randn(n, STEPS, VITALS, generator=gen).cumsum(1) / STEPS ** 0.5
    labs = torch.exp(torch.randn(n, LABS, generator=gen))
    lab_risk = torch.tanh((labs - 1.65) / 2.16 @ w_lab) @ v_lab
    trend_risk = (series[:, -1] - series[:, 0]) @ w_seq
    return series, labs, lab_risk + trend_risk + 0.1 * torch.randn(n, generator=gen)


class RiskModel(nn.Module):
    def __init__(self, *, momentum):
        super().__init__()
        self.gru = nn.GRU(VITALS, 32, batch_first=True)
        self.labs = nn.Sequential(
            nn.Linear(LABS, 64), nn.BatchNorm1d(64, 1e-3, momentum), nn.ReLU(),
            nn.Linear(64, 32), nn.BatchNorm1d(32, 1e-3, momentum), nn.ReLU(),
        )
        self.head = nn.Linear(64, 1)

    def forward(self, series, labs):
        _, h = self.gru(series)
        return self.head(torch.cat([h[-1], self.labs(labs)], dim=1)).squeeze(1)


def train_step(model, optimizer, loss_fn, series, labs, target):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(series, labs), target)
    loss.backward()
    optimizer.step()
    return loss


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    w_lab = torch.randn(LABS, 16, generator=gen) / LABS ** 0.5
    v_lab = torch.randn(16, generator=gen) / 2
    w_seq = torch.randn(VITALS, generator=gen) * 0.7
    train = make_data(N_TRAIN, w_lab, v_lab, w_seq, gen)
    series, labs, y_test = make_data(N_TEST, w_lab, v_lab, w_seq, gen)
    loader = DataLoader(TensorDataset(*train), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(2))

    # bug: Keras' momentum=0.9 (keep 90%) passed as torch's momentum (replace 90%)
    model = RiskModel(momentum=1 - KERAS_MOMENTUM if fixed else KERAS_MOMENTUM)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for epoch in range(EPOCHS):
        for batch in loader:
            loss = train_step(model, optimizer, loss_fn, *batch)
            if mon is not None:
                mon.step(loss)

    model.eval()
    with torch.no_grad():
        mse = loss_fn(model(series, labs), y_test).item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": mse, "higher_is_better": False}
