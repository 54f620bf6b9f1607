"""LSTM sequence classifier, Adam, MultiStepLR(milestones=[30, 80]) stepped inside train_step.

The milestones come from a 100-epoch recipe (this run is shortened to 40 epochs of 20 batches):
decay 10x at epoch 30 and again at epoch 80. ``train_step`` calls ``scheduler.step()`` after
every optimizer step, so the milestones are passed at batch 30 and batch 80: from step 80 of
800 on, Adam runs at 1e-5, a hundredth of the rate the recipe trains with. The fixed twin
steps the scheduler once per epoch, after the batch loop.

Measured (held-out accuracy, higher is better): buggy 0.234 (chance 0.25), fixed 0.799.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "LR_SCHEDULE_TOO_FAST"

EPOCHS = 40
BATCH = 32
N_TRAIN = 640          # 20 batches per epoch -> 800 optimizer steps
N_TEST = 512
SEQ = 12
FEATURES = 8
CLASSES = 4


def make_data(n, gen):
    x = torch.randn(n, SEQ, FEATURES, generator=gen)
    # class = (sign of channel 0 over the first half, sign of channel 1 over the second half)
    a = (x[:, : SEQ // 2, 0].mean(1) > 0).long()
    b = (x[:, SEQ // 2:, 1].mean(1) > 0).long()
    return x, 2 * a + b


class SequenceClassifier(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, hidden, batch_first=True)
        self.head = nn.Linear(hidden, CLASSES)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def train_step(model, batch, optimizer, scheduler, loss_fn, *, per_batch_scheduler):
    x, y = batch
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if per_batch_scheduler:
        scheduler.step()                 # bug: milestones in epochs, stepped every batch
    return loss


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    x_train, y_train = make_data(N_TRAIN, gen)
    x_test, y_test = make_data(N_TEST, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(2))

    model = SequenceClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[30, 80], gamma=0.1)
    loss_fn = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    for epoch in range(EPOCHS):
        model.train()
        for batch in loader:
            loss = train_step(model, batch, optimizer, scheduler, loss_fn,
                              per_batch_scheduler=not fixed)
            if mon is not None:
                mon.step(loss)
        if fixed:
            scheduler.step()             # fix: once per epoch

    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
