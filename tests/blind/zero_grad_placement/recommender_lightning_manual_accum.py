"""Matrix-factorization recommender in Lightning with manual optimization, Adagrad, 8 of 64.

Ratings come from hidden rank-4 user and item factors plus noise; the model is a user embedding,
an item embedding and per-user/per-item biases, scored by their dot product. The
LightningModule sets ``automatic_optimization = False`` and accumulates 8 micro-batches of 64
ratings per optimizer step, dividing each loss by 8 and calling ``opt.step()`` when
``(batch_idx + 1) % 8 == 0``. The buggy ``training_step`` starts with ``opt.zero_grad()`` as a
one-batch manual step does, so it runs every micro-batch: each step applies only the last 64
ratings (at 1/8 of the size), and 7 of every 8 ratings never reach an embedding row. The fixed
twin calls ``opt.zero_grad()`` right after ``opt.step()``, as Lightning's manual-optimization
docs do for accumulation.

Measured (held-out mean squared error, lower is better; the ratings' variance is 1.03): buggy 1.235,
fixed 0.238. Adagrad divides by the root of its summed squared gradients, so the 1/8
scale mostly cancels: the loss is the ratings thrown away.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "ACCUMULATION_DISCARDED"

USERS = 300
ITEMS = 200
RANK = 4
N_TRAIN = 8192
N_TEST = 2048
MICRO_BATCH = 64
ACCUM = 8              # 128 micro-batches -> 16 optimizer steps per epoch, 80 in all
EPOCHS = 5
LR = 0.3


def make_ratings(n, user_f, item_f, gen):
    users = torch.randint(0, USERS, (n,), generator=gen)
    items = torch.randint(0, ITEMS, (n,), generator=gen)
    ratings = (user_f[users] * item_f[items]).sum(1) + 0.1 * torch.randn(n, generator=gen)
    return users, items, ratings


def _lightning_module(fixed):
    import lightning.pytorch as pl

    class MatrixFactorization(pl.LightningModule):
        def __init__(self, dim=8):
            super().__init__()
            self.automatic_optimization = False
            self.user = nn.Embedding(USERS, dim)
            self.item = nn.Embedding(ITEMS, dim)
            self.user_bias = nn.Embedding(USERS, 1)
            self.item_bias = nn.Embedding(ITEMS, 1)
            for table in (self.user, self.item):
                nn.init.normal_(table.weight, std=0.1)
            for table in (self.user_bias, self.item_bias):
                nn.init.zeros_(table.weight)

        def forward(self, users, items):
            dot = (self.user(users) * self.item(items)).sum(1)
            return dot + self.user_bias(users).squeeze(1) + self.item_bias(items).squeeze(1)

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            if not fixed:
                opt.zero_grad()           # bug: every micro-batch clears the window
            users, items, ratings = batch
            loss = nn.functional.mse_loss(self(users, items), ratings)
            self.manual_backward(loss / ACCUM)
            if (batch_idx + 1) % ACCUM == 0:
                opt.step()
                if fixed:
                    opt.zero_grad()       # fix: once per window, after the step
            return loss

        def configure_optimizers(self):
            return torch.optim.Adagrad(self.parameters(), lr=LR)

    return MatrixFactorization()


def run(*, fixed: bool, monitor: bool = True):
    import lightning.pytorch as pl

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(71)
    user_f = torch.randn(USERS, RANK, generator=gen) / RANK ** 0.25
    item_f = torch.randn(ITEMS, RANK, generator=gen) / RANK ** 0.25
    train = make_ratings(N_TRAIN, user_f, item_f, gen)
    users_test, items_test, ratings_test = make_ratings(N_TEST, user_f, item_f, gen)
    loader = DataLoader(TensorDataset(*train), batch_size=MICRO_BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(72))

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
        test_mse = nn.functional.mse_loss(model(users_test, items_test), ratings_test).item()
    report = callbacks[0].report if monitor else None
    return {"report": report, "metric": test_mse, "higher_is_better": False}
