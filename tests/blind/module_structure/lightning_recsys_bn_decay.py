"""Lightning recommender: user/item embeddings + BatchNorm'd count features, BN decay from TF.

A rating model: a user embedding, an item embedding and six count features (views, clicks,
dwell seconds... log-normal, heavy right tail) normalized by a BatchNorm1d, concatenated into a
BatchNorm'd MLP. The LightningModule applies the config's ``bn_decay=0.98`` (the value of the
TensorFlow original, where it keeps 98% of the running statistics) after building the layers::

    for module in self.modules():
        if isinstance(module, nn.BatchNorm1d):
            module.momentum = self.hparams.bn_decay

In PyTorch that momentum takes 98% of the running statistics from the current batch: after
``fit`` the running mean and variance are those of the last batch (1000 rows in batches of 16:
the last has 8), and the rare large counts of the held-out rows are scaled by a variance that
never saw them. The fixed twin sets ``1 - bn_decay`` (0.02). Lightning Trainer, SGD with
momentum, batch 16.

Measured (held-out MSE in eval mode, lower is better; the noise alone scores 0.01): buggy
2.31, fixed 0.440.
"""
import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "BATCHNORM_MOMENTUM_INVERTED"

USERS = 50
ITEMS = 80
COUNTS = 6
DIM = 4
N_TRAIN = 1000
N_TEST = 1000
EPOCHS = 8
BATCH = 16


def make_data(n, user_bias, item_bias, w, v, gen):
    users = torch.randint(0, USERS, (n,), generator=gen)
    items = torch.randint(0, ITEMS, (n,), generator=gen)
    counts = torch.exp(torch.randn(n, COUNTS, generator=gen))
    standardized = (counts - 1.65) / 2.16                        # log-normal(0, 1) mean and std
    y = user_bias[users] + item_bias[items] + torch.tanh(standardized @ w) @ v
    return users, items, counts, y + 0.1 * torch.randn(n, generator=gen)


class RatingModule(pl.LightningModule):
    def __init__(self, *, bn_decay, fixed, lr):
        super().__init__()
        self.save_hyperparameters()
        self.users = nn.Embedding(USERS, DIM)
        self.items = nn.Embedding(ITEMS, DIM)
        self.count_norm = nn.BatchNorm1d(COUNTS)
        self.mlp = nn.Sequential(
            nn.Linear(2 * DIM + COUNTS, 64), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(),
            nn.Linear(32, 1),
        )
        momentum = 1 - bn_decay if fixed else bn_decay     # bug: TF's decay is not torch's momentum
        for module in self.modules():
            if isinstance(module, nn.BatchNorm1d):
                module.momentum = momentum
        self.loss_fn = nn.MSELoss()

    def forward(self, users, items, counts):
        features = torch.cat([self.users(users), self.items(items), self.count_norm(counts)], 1)
        return self.mlp(features).squeeze(1)

    def training_step(self, batch, batch_idx):
        users, items, counts, target = batch
        return self.loss_fn(self(users, items, counts), target)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    user_bias = torch.randn(USERS, generator=gen) * 0.5
    item_bias = torch.randn(ITEMS, generator=gen) * 0.5
    w = torch.randn(COUNTS, 8, generator=gen) / COUNTS ** 0.5
    v = torch.randn(8, generator=gen) / 2
    train = make_data(N_TRAIN, user_bias, item_bias, w, v, gen)
    users, items, counts, y_test = make_data(N_TEST, user_bias, item_bias, w, v, gen)
    loader = DataLoader(TensorDataset(*train), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(2))

    module = RatingModule(bn_decay=0.98, fixed=fixed, lr=0.02)
    callbacks = []
    if monitor:
        from gradhunt.integrations import GradhuntCallback
        callbacks.append(GradhuntCallback(every=25, print_report=False))
    trainer = pl.Trainer(max_epochs=EPOCHS, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=callbacks)
    trainer.fit(module, loader)

    module.eval()
    with torch.no_grad():
        mse = module.loss_fn(module(users, items, counts), y_test).item()
    report = callbacks[0].report if monitor else None
    return {"report": report, "metric": mse, "higher_is_better": False}
