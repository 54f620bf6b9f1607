"""Domain-adversarial MLP (DANN) with a gradient-reversal layer, a ``train_step`` function, SGD.

Two domains of 12-D tabular rows share a label rule (a noisy linear score of the first three
features); in the unlabelled target domain (another sensor) the last 8 channels are offset,
which tells the domains apart. A domain classifier reads the shared features through a
gradient-reversal layer, so the feature extractor is pushed to make the domains
indistinguishable (it should drop the offset channels). The buggy reversal layer is an
``nn.Module`` with ``forward`` returning ``x.view_as(x)`` and ``backward(self, grad_output)``
returning ``-lambda * grad_output``: autograd never calls it, the domain gradient reaches the
extractor unreversed, and the extractor learns to *separate* the domains.
Fix: a ``torch.autograd.Function`` with static forward/backward, called as
``GradReverseFn.apply`` from the same Module.

Measured (without gradhunt): the metric is the model's own domain classifier's accuracy on
held-out rows of both domains (lower is better, 0.5 is invariant): buggy 0.959, fixed 0.564.
Target-domain label accuracy barely differs on this data (buggy 0.880, fixed 0.892; returned
as ``target_accuracy``), so it is not the metric.
"""
import torch
from torch import nn
import torch.nn.functional as F

EXPECTED = "MODULE_BACKWARD_IGNORED"

FEATURES = 12
STEPS = 300
BATCH = 64
LAMBDA = 1.0


def make_domain(n, *, target, gen):
    x = torch.randn(n, FEATURES, generator=gen)
    score = x[:, 0] + 0.8 * x[:, 1] - 0.6 * x[:, 2] + 0.5 * torch.randn(n, generator=gen)
    y = (score > 0).long()
    if target:                                  # another sensor: offset and rescaled channels
        x[:, 4:] += 1.2
    return x, y


class GradientReversal(nn.Module):
    """Identity forward; the gradient should come back times -lambda."""

    def __init__(self, lambd):
        super().__init__()
        self.lambd = lambd

    def forward(self, x):
        return x.view_as(x)

    def backward(self, grad_output):            # bug: autograd never calls a Module's backward
        return -self.lambd * grad_output


class GradReverseFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd):
        ctx.lambd = lambd
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return -ctx.lambd * grad_output, None


class GradientReversalFixed(nn.Module):
    def __init__(self, lambd):
        super().__init__()
        self.lambd = lambd

    def forward(self, x):
        return GradReverseFn.apply(x, self.lambd)


class DANN(nn.Module):
    def __init__(self, *, fixed):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 32),
                                      nn.ReLU())
        self.label_head = nn.Linear(32, 2)
        self.reverse = GradientReversalFixed(LAMBDA) if fixed else GradientReversal(LAMBDA)
        self.domain_head = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x):
        h = self.features(x)
        return self.label_head(h), self.domain_head(self.reverse(h))


def train_step(model, optimizer, xs, ys, xt):
    model.train()
    optimizer.zero_grad()
    x = torch.cat([xs, xt])
    labels, domains = model(x)
    domain_target = torch.cat([torch.zeros(len(xs)), torch.ones(len(xt))]).long()
    loss = F.cross_entropy(labels[:len(xs)], ys) + F.cross_entropy(domains, domain_target)
    loss.backward()
    optimizer.step()
    return loss


def domain_accuracy(model, xs, xt):
    """The model's own domain classifier on held-out rows of both domains: near 0.5 when the
    features are domain-invariant (the adversarial game is won by the extractor)."""
    with torch.no_grad():
        d = torch.cat([torch.zeros(len(xs)), torch.ones(len(xt))]).long()
        return (model(torch.cat([xs, xt]))[1].argmax(1) == d).float().mean().item()


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    xs, ys = make_domain(2048, target=False, gen=gen)
    xt, _ = make_domain(2048, target=True, gen=gen)
    xs_test, _ = make_domain(1024, target=False, gen=gen)
    xt_test, yt_test = make_domain(1024, target=True, gen=gen)

    model = DANN(fixed=fixed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)

    order = torch.Generator().manual_seed(2)
    for step in range(STEPS):
        i = torch.randint(0, len(xs), (BATCH,), generator=order)
        j = torch.randint(0, len(xt), (BATCH,), generator=order)
        loss = train_step(model, optimizer, xs[i], ys[i], xt[j])
        if mon is not None:
            mon.step(loss)

    model.eval()
    with torch.no_grad():
        target_accuracy = (model(xt_test)[0].argmax(1) == yt_test).float().mean().item()
    domain = domain_accuracy(model, xs_test, xt_test)
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": domain, "higher_is_better": False,
            "target_accuracy": target_accuracy}
