"""Count regression with a LayerNorm MLP in Lightning, Adam, ``nn.PoissonNLLLoss``.

Store-day visit counts are Poisson with a rate set by 10 standardised features (rates from
about 0.3 to 40). The model's head ends in ``F.softplus`` so that it predicts the rate itself,
which is what the evaluation and the serving code read. The loss is ``nn.PoissonNLLLoss()``
with its default ``log_input=True``, which reads its input as the log of the rate and computes
``exp(input) - target * input``: the rates are taken for log-rates, so the model learns
``softplus(out) = log(rate)`` and the rates it reports are the logs of the right ones. Nothing
fails and the loss falls. Fix: ``nn.PoissonNLLLoss(log_input=False)`` for a model that outputs
rates.

Metric: held-out mean absolute error between the predicted rate and the true rate (lower is
better). Measured without gradhunt: see the folder docstring.
"""
import lightning.pytorch as pl
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "SCORES_AS_LOG_PROBABILITIES"

FEATURES = 10
EPOCHS = 6
BATCH = 64


class RateModel(pl.LightningModule):
    def __init__(self, *, fixed: bool, lr: float = 3e-3):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FEATURES, 64), nn.LayerNorm(64), nn.GELU(),
                                 nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU(),
                                 nn.Linear(64, 1))
        # fix: the model outputs rates, so the loss must not exponentiate them
        self.loss = nn.PoissonNLLLoss(log_input=False) if fixed else nn.PoissonNLLLoss()
        self.lr = lr

    def forward(self, x):
        return F.softplus(self.net(x)).squeeze(-1)       # the predicted rate

    def training_step(self, batch, batch_idx):
        x, counts = batch
        return self.loss(self(x), counts)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def make_data(n, weights, gen):
    x = torch.randn(n, FEATURES, generator=gen)
    rate = torch.exp(1.2 + x @ weights)
    return x, torch.poisson(rate, generator=gen), rate


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(11)
    weights = 0.35 * torch.randn(FEATURES, generator=gen)
    x_train, y_train, _ = make_data(3000, weights, gen)
    x_test, _, rate_test = make_data(1000, weights, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(12))

    module = RateModel(fixed=fixed)
    callbacks = []
    if monitor:
        from gradhunt.integrations import GradhuntCallback
        callbacks.append(GradhuntCallback(print_report=False))
    trainer = pl.Trainer(max_epochs=EPOCHS, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=callbacks)
    trainer.fit(module, loader)

    module.eval()
    with torch.no_grad():
        mae = (module(x_test) - rate_test).abs().mean().item()
    report = callbacks[0].report if monitor else None
    return {"report": report, "metric": mae, "higher_is_better": False}
