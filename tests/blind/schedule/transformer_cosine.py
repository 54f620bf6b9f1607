"""Small transformer encoder regressor, AdamW, CosineAnnealingLR(T_max=epochs) stepped per batch.

A ``Trainer`` class owns the loop; its ``fit()`` builds a cosine schedule over the number of
epochs (T_max = epochs = 10) and calls ``scheduler.step()`` in the batch loop. With 40 batches
per epoch the cosine completes a half-period every 10 batches: the learning rate swings from its
peak (1e-2) to 0 and back every 20 steps, 20 full cycles over the run, and is back at the peak
on the last step instead of annealed to 0, so the weights end where a step at the peak rate
throws them. The fixed twin steps the scheduler once per epoch.

Measured (held-out MSE, lower is better; the label noise alone scores 0.0025): buggy
0.0124, fixed 0.0054.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "LR_SCHEDULE_TOO_FAST"

VOCAB = 24
SEQ = 12
N_TRAIN = 1280         # 40 batches of 32 per epoch
N_TEST = 512
EPOCHS = 10


def make_data(n, token_scores, gen):
    """A score per sequence: the sum of its tokens' hidden scores, plus a little noise."""
    x = torch.randint(0, VOCAB, (n, SEQ), generator=gen)
    target = token_scores[x].sum(1) / SEQ ** 0.5
    return x, target + 0.05 * torch.randn(n, generator=gen)


class Encoder(nn.Module):
    def __init__(self, d_model=32, heads=4):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Parameter(torch.randn(1, SEQ, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=64, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 1)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens) + self.pos)
        return self.head(self.norm(h.mean(1))).squeeze(-1)


class Trainer:
    def __init__(self, model, train_loader, *, epochs, lr, weight_decay, step_per_batch,
                 monitor=False):
        self.model = model
        self.loader = train_loader
        self.epochs = epochs
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=epochs)
        self.step_per_batch = step_per_batch
        self.loss_fn = nn.MSELoss()
        self.mon = None
        if monitor:
            from gradhunt import Monitor
            self.mon = Monitor(model, optimizer=self.optimizer)

    def training_step(self, tokens, targets):
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(tokens), targets)
        loss.backward()
        self.optimizer.step()
        return loss

    def fit(self):
        for epoch in range(self.epochs):
            self.model.train()
            for tokens, targets in self.loader:
                loss = self.training_step(tokens, targets)
                if self.step_per_batch:
                    self.scheduler.step()      # bug: T_max is in epochs
                if self.mon is not None:
                    self.mon.step(loss)
            if not self.step_per_batch:
                self.scheduler.step()          # fix: once per epoch
        report = None
        if self.mon is not None:
            report = self.mon.report()
            self.mon.close()
        return report

    @torch.no_grad()
    def evaluate(self, tokens, targets):
        self.model.eval()
        return self.loss_fn(self.model(tokens), targets).item()


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    token_scores = torch.randn(VOCAB, generator=gen)
    x_train, y_train = make_data(N_TRAIN, token_scores, gen)
    x_test, y_test = make_data(N_TEST, token_scores, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(2))
    trainer = Trainer(Encoder(), loader, epochs=EPOCHS, lr=1e-2, weight_decay=0.01,
                      step_per_batch=not fixed, monitor=monitor)
    report = trainer.fit()
    mse = trainer.evaluate(x_test, y_test)
    return {"report": report, "metric": mse, "higher_is_better": False}
