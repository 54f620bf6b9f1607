"""Binarised CNN (BinaryConnect-style weights, quantised activations), plain loop, Adam.

Synthetic 10x10 images of 4 classes (a bar in one of four orientations, with noise). Every conv
and the classifier use sign-binarised weights (latent float weights kept for the optimizer) and
the hidden activations are rounded to a few levels. The buggy program writes its
straight-through estimators as ``nn.Module`` subclasses with a ``backward(self, grad_output)``
method returning the incoming gradient (clamped), as one would on ``torch.autograd.Function``:
autograd never calls it. The gradient through ``torch.sign`` and ``torch.round`` is autograd's
own, zero, so the latent weights never change; only the BatchNorm affine parameters and
the output scale train.
Fix: the same estimators as ``torch.autograd.Function``s with static forward/backward, called
with ``.apply`` (here from inside the same Modules).

Measured (held-out accuracy, higher is better, without gradhunt): buggy 0.252 (chance), fixed 0.871.
"""
import torch
from torch import nn
import torch.nn.functional as F

EXPECTED = "MODULE_BACKWARD_IGNORED"

SIZE = 10
CLASSES = 4
STEPS = 150
BATCH = 64


def make_data(n, gen):
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    x = 0.4 * torch.randn(n, 1, SIZE, SIZE, generator=gen)
    offs = torch.randint(3, SIZE - 3, (n, 2), generator=gen)
    for i in range(n):
        r, c, k = int(offs[i, 0]), int(offs[i, 1]), int(y[i])
        for t in range(-3, 4):
            rr, cc = [(r, c + t), (r + t, c), (r + t, c + t), (r + t, c - t)][k]
            if 0 <= rr < SIZE and 0 <= cc < SIZE:
                x[i, 0, rr, cc] += 2.0
    return x, y


# --- the buggy estimators: Modules with a backward that autograd never calls -------------------
class SignSTE(nn.Module):
    def forward(self, w):
        return torch.sign(w)

    def backward(self, grad_output):            # bug: never called; sign's gradient is 0
        return grad_output.clamp(-1.0, 1.0)


class RoundSTE(nn.Module):
    def __init__(self, levels=4):
        super().__init__()
        self.levels = levels

    def forward(self, x):
        return torch.round(x.clamp(0, 1) * (self.levels - 1)) / (self.levels - 1)

    def backward(self, grad_output):            # bug: never called; round's gradient is 0
        return grad_output


# --- the fix: the same estimators as autograd Functions --------------------------------------
class _SignFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w):
        ctx.save_for_backward(w)
        return torch.sign(w)

    @staticmethod
    def backward(ctx, grad_output):
        (w,) = ctx.saved_tensors
        return grad_output * (w.abs() <= 1).to(grad_output.dtype)


class _RoundFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, levels):
        return torch.round(x.clamp(0, 1) * (levels - 1)) / (levels - 1)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


class SignFixed(nn.Module):
    def forward(self, w):
        return _SignFn.apply(w)


class RoundFixed(nn.Module):
    def __init__(self, levels=4):
        super().__init__()
        self.levels = levels

    def forward(self, x):
        return _RoundFn.apply(x, self.levels)


class BinaryConv2d(nn.Conv2d):
    def __init__(self, *args, binarize, **kwargs):
        super().__init__(*args, bias=False, **kwargs)
        self.binarize = binarize

    def forward(self, x):
        return F.conv2d(x, self.binarize(self.weight), None, self.stride, self.padding)


class BinaryLinear(nn.Linear):
    def __init__(self, *args, binarize, **kwargs):
        super().__init__(*args, **kwargs)
        self.binarize = binarize

    def forward(self, x):
        return F.linear(x, self.binarize(self.weight), self.bias)


class BinaryNet(nn.Module):
    def __init__(self, *, fixed):
        super().__init__()
        sign = SignFixed() if fixed else SignSTE()
        self.conv1 = BinaryConv2d(1, 16, 3, padding=1, binarize=sign)
        self.bn1 = nn.BatchNorm2d(16)
        self.act1 = RoundFixed() if fixed else RoundSTE()
        self.conv2 = BinaryConv2d(16, 32, 3, padding=1, binarize=sign)
        self.bn2 = nn.BatchNorm2d(32)
        self.act2 = RoundFixed() if fixed else RoundSTE()
        self.fc = BinaryLinear(32, CLASSES, binarize=sign)
        self.scale = nn.Parameter(torch.tensor(0.5))

    def forward(self, x):
        x = self.act1(self.bn1(self.conv1(x)))
        x = F.max_pool2d(self.act2(self.bn2(self.conv2(x))), 2)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.scale * self.fc(x)


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    x_train, y_train = make_data(2048, gen)
    x_test, y_test = make_data(512, gen)

    model = BinaryNet(fixed=fixed)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    criterion = nn.CrossEntropyLoss()

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    order = torch.Generator().manual_seed(2)
    model.train()
    for step in range(STEPS):
        idx = torch.randint(0, len(x_train), (BATCH,), generator=order)
        optimizer.zero_grad()
        loss = criterion(model(x_train[idx]), y_train[idx])
        loss.backward()
        optimizer.step()
        with torch.no_grad():                     # BinaryConnect: keep latent weights in [-1, 1]
            for m in (model.conv1, model.conv2, model.fc):
                m.weight.clamp_(-1, 1)
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
