"""LSTM forecaster, Lightning manual optimization, RMSprop, ``opt.zero_grad()`` before ``step``.

Next-value forecasting on noisy sums of two sines with random frequencies and phases: the model
reads 24 values and predicts the 25th. The LightningModule sets
``automatic_optimization = False`` and writes its own step; the buggy ``training_step`` reads
``self.manual_backward(loss); opt.zero_grad(); opt.step()``, so RMSprop gets no gradient (the
LightningOptimizer's ``zero_grad`` sets ``.grad`` to None) and the weights never move. The fixed
twin calls ``opt.zero_grad()`` before ``self.manual_backward(loss)``, as Lightning's manual
optimization docs do.

Measured (held-out mean squared error, lower is better): buggy 0.550 (about the series'
variance: the untrained model predicts ~0), fixed 0.0163.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "GRADIENTS_CLEARED_BEFORE_STEP"

WINDOW = 24
N_TRAIN = 1024
N_TEST = 256
BATCH = 32
EPOCHS = 4


def make_data(n, gen):
    t = torch.arange(WINDOW + 1).float()
    freq = 0.2 + 0.4 * torch.rand(n, 2, generator=gen)
    phase = 6.283 * torch.rand(n, 2, generator=gen)
    series = (torch.sin(freq[:, :1] * t + phase[:, :1])
              + 0.5 * torch.sin(freq[:, 1:] * t + phase[:, 1:]))
    series = series + 0.05 * torch.randn(n, WINDOW + 1, generator=gen)
    return series[:, :WINDOW].unsqueeze(-1), series[:, WINDOW:]


def _lightning_module(fixed):
    import lightning.pytorch as pl

    class Forecaster(pl.LightningModule):
        def __init__(self, hidden=32):
            super().__init__()
            self.automatic_optimization = False
            self.lstm = nn.LSTM(1, hidden, batch_first=True)
            self.head = nn.Linear(hidden, 1)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.head(out[:, -1])

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            x, y = batch
            if fixed:
                opt.zero_grad()           # fix: clear before the backward
            loss = nn.functional.mse_loss(self(x), y)
            self.manual_backward(loss)
            if not fixed:
                opt.zero_grad()           # bug: between the backward and the step
            opt.step()
            return loss

        def configure_optimizers(self):
            return torch.optim.RMSprop(self.parameters(), lr=3e-3)

    return Forecaster()


def run(*, fixed: bool, monitor: bool = True):
    import lightning.pytorch as pl

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(61)
    x_train, y_train = make_data(N_TRAIN, gen)
    x_test, y_test = make_data(N_TEST, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(62))

    model = _lightning_module(fixed)
    callbacks = []
    if monitor:
        from gradhunt.integrations import GradhuntCallback
        callbacks.append(GradhuntCallback(print_report=False))
    trainer = pl.Trainer(max_epochs=EPOCHS, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=callbacks)
    trainer.fit(model, loader)

    model.eval()
    with torch.no_grad():
        test_mse = nn.functional.mse_loss(model(x_test), y_test).item()
    report = callbacks[0].report if monitor else None
    return {"report": report, "metric": test_mse, "higher_is_better": False}
