"""A sign-activation MLP with BatchNorm, DataLoader with epochs, ``optimizer.step(closure)``,
SGD with Nesterov momentum.

Tabular rows of 20 features, 5 classes given by the largest of 5 fixed linear scores. Every
hidden layer is Linear -> BatchNorm1d -> sign (binary activations, as in a binarised network
for a microcontroller). The buggy ``BinaryActivation`` is an ``nn.Module`` whose ``forward``
returns ``torch.sign(x)`` and whose ``backward(self, grad_output)`` applies the hardtanh
straight-through estimator: autograd never calls it, the gradient through ``torch.sign`` is
zero, and every layer below the last sign stays at its random init (only the output layer
learns, on random binary features). Fix: the straight-through estimator by the detach idiom,
``x.clamp(-1, 1) + (torch.sign(x) - x.clamp(-1, 1)).detach()``.

Measured (held-out accuracy, higher is better, without gradhunt): buggy 0.461, fixed 0.866.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import torch.nn.functional as F

EXPECTED = "MODULE_BACKWARD_IGNORED"

FEATURES = 20
CLASSES = 5
HIDDEN = 32
EPOCHS = 5


def make_data(n, teacher, gen):
    x = torch.randn(n, FEATURES, generator=gen)
    return x, (x @ teacher).argmax(1)


class BinaryActivation(nn.Module):
    def __init__(self, *, detach_idiom):
        super().__init__()
        self.detach_idiom = detach_idiom

    def forward(self, x):
        if self.detach_idiom:                                   # fix: STE in the forward
            soft = x.clamp(-1, 1)
            return soft + (torch.sign(x) - soft).detach()
        return torch.sign(x)

    def backward(self, grad_output):      # bug: autograd never calls a Module's backward
        return grad_output.clamp(-1, 1)   # (meant: hardtanh straight-through)


def block(n_in, n_out, fixed):
    return nn.Sequential(nn.Linear(n_in, n_out), nn.BatchNorm1d(n_out),
                         BinaryActivation(detach_idiom=fixed))


class SignMLP(nn.Module):
    def __init__(self, *, fixed):
        super().__init__()
        self.blocks = nn.Sequential(block(FEATURES, HIDDEN, fixed), block(HIDDEN, HIDDEN, fixed),
                                    block(HIDDEN, HIDDEN, fixed))
        self.out = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.out(self.blocks(x))


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    teacher = torch.randn(FEATURES, CLASSES, generator=gen)
    x_train, y_train = make_data(4096, teacher, gen)
    x_test, y_test = make_data(1024, teacher, gen)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=128, shuffle=True,
                        generator=torch.Generator().manual_seed(2))

    model = SignMLP(fixed=fixed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)
    for _ in range(EPOCHS):
        model.train()
        for xb, yb in loader:
            def closure():
                optimizer.zero_grad()
                loss = F.cross_entropy(model(xb), yb)
                loss.backward()
                return loss
            loss = optimizer.step(closure)
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
