"""Healthy: a GRU read both ways whose summary is binarised by a sign straight-through
estimator, DataLoader with epochs, AdamW.

Sequences of 20 steps with 4 channels; the class (of 3) is which channel carries a short
burst, and whether it comes early or late decides nothing. The model reads the sequence
forwards and backwards with two GRUs (``forward_features`` and ``backward_features``, plain
methods that only share the word "backward"), binarises the concatenated summary into a 32-bit
hash code with ``SignSTE``, an ``nn.Module`` whose forward calls ``_SignSTEFn.apply`` (a
``torch.autograd.Function`` with a hardtanh straight-through backward, which autograd does
call), and classifies the code. Nothing is wrong here.

Measured (held-out accuracy, without gradhunt): 0.998.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import torch.nn.functional as F

EXPECTED = None

STEPS_T = 20
CHANNELS = 4
CLASSES = 3
EPOCHS = 4


def make_data(n, gen):
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    x = 0.5 * torch.randn(n, STEPS_T, CHANNELS, generator=gen)
    start = torch.randint(0, STEPS_T - 4, (n,), generator=gen)
    for i in range(n):
        x[i, int(start[i]):int(start[i]) + 4, int(y[i])] += 2.0
    return x, y


class _SignSTEFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x.abs() <= 1).to(grad_output.dtype)


class SignSTE(nn.Module):
    def forward(self, x):
        return _SignSTEFn.apply(x)


class BinaryCodeGRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.fwd = nn.GRU(CHANNELS, 24, batch_first=True)
        self.bwd = nn.GRU(CHANNELS, 24, batch_first=True)
        self.to_code = nn.Linear(48, 32)
        self.norm = nn.LayerNorm(32)
        self.binarize = SignSTE()
        self.classifier = nn.Linear(32, CLASSES)

    def forward_features(self, x):
        return self.fwd(x)[1][-1]

    def backward_features(self, x):
        return self.bwd(torch.flip(x, dims=[1]))[1][-1]

    def forward(self, x):
        h = torch.cat([self.forward_features(x), self.backward_features(x)], dim=1)
        code = self.binarize(self.norm(self.to_code(h)))
        return self.classifier(code)


def run(*, fixed: bool = True, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    x_train, y_train = make_data(1536, gen)
    x_test, y_test = make_data(512, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(2))

    model = BinaryCodeGRU()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)
    for _ in range(EPOCHS):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(loss)

    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
