"""A transformer encoder over sensor frames, trained with gradient accumulation, where one
reading in one micro-batch is NaN (a CSV cell "NaN" for a dropped sample).

Bug: one frame of one training sequence holds a NaN. Attention spreads it over the whole
sequence, that micro-batch's loss is NaN, its backward adds NaN into the accumulated gradients of
every parameter, and the window's AdamW step writes NaN into the weights: one bad micro-batch out
of four ruins the optimizer step of its window, and the run.
Fixed: the dropped sample is interpolated from its neighbours (the value it should have had).
Idiom: a shuffling ``DataLoader`` over epochs, 4 micro-batches per optimizer step with
``(i + 1) % ACCUM == 0``, each loss divided by ACCUM, ``clip_grad_norm_``, AdamW, dropout on;
an epoch's last micro-batches that do not fill a window are read but not run.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.blind.step_guard._common import execute

KIND = "accumulation"
BAD_STEPS = frozenset({3, 21, 52, 82})
HIGHER_IS_BETTER = True
TOLERANCE = 0.06          # held-out accuracy, absolute
BAD_SEQ, BAD_T, BAD_CH = 391, 7, 1
EPOCHS, MICRO, ACCUM, T = 4, 8, 4, 16


def _frames(fixed):
    g = torch.Generator().manual_seed(31)
    n = 900
    y = torch.randint(0, 3, (n,), generator=g)
    t = torch.arange(T).float()
    x = 0.4 * torch.randn(n, T, 4, generator=g)
    x[:, :, 0] += torch.sin(t * (0.3 + 0.25 * y.float())[:, None])
    x[:, :, 1] += torch.where(y == 2, 1.0, -1.0)[:, None] * (t / T)
    x[:, :, 2] += (y == 1).float()[:, None] * torch.cos(t * 0.9)
    if not fixed:
        x[BAD_SEQ, BAD_T, BAD_CH] = float("nan")
    else:
        x[BAD_SEQ, BAD_T, BAD_CH] = (x[BAD_SEQ, BAD_T - 1, BAD_CH]
                                     + x[BAD_SEQ, BAD_T + 1, BAD_CH]) / 2
    return x[:700], y[:700], x[700:], y[700:]


class SensorTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 32)
        self.pos = nn.Parameter(0.02 * torch.randn(1, T, 32))
        layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.1,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x) + self.pos).mean(1))


def run(fixed, *, guard=None, guard_replay=False, **reference):
    xtr, ytr, xte, yte = _frames(fixed)
    torch.manual_seed(0)
    model = SensorTransformer()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size=MICRO, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(6))

    def train(control):
        model.train()
        usable = len(loader) // ACCUM * ACCUM   # the micro-batches that fill whole windows
        for _ in range(EPOCHS):
            optimizer.zero_grad()
            for i, (xb, yb) in enumerate(loader):
                if i >= usable:
                    continue
                loss = loss_fn(model(xb), yb) / ACCUM
                loss.backward()
                if (i + 1) % ACCUM == 0:
                    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    control.step(optimizer, loss * ACCUM)
                    optimizer.zero_grad()

    def evaluate():
        model.eval()
        return (model(xte).argmax(1) == yte).float().mean()

    return execute(model, optimizer, train, evaluate, guard=guard, guard_replay=guard_replay,
                   **reference)
