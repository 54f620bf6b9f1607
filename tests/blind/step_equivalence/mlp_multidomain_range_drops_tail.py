"""LayerNorm MLP regressor on domain-balanced batches; a micro-batch loop whose ``range`` stops
one micro-batch early, so the last rows of every batch never reach the gradient.

Model family: MLP regression with LayerNorm (inputs: 6 features + a one-hot of 4 domains; each
domain has its own target function).
Idiom: a ``Trainer`` class with a ``step`` method used as ``train_step``; Adam; batches are
built domain-balanced (16 rows of each domain, stacked in domain order), and accumulated over
micro-batches of 16 rows taken by index ranges, each weighted by its share of the rows.
The bug: ``for start in range(0, n - mb, mb)`` -- the stop is exclusive, so the last micro-batch
(rows 48..63, the whole of the last domain) is never forwarded; the step's gradient is that of
the first 48 rows (times 3/4), and the model never learns the last domain.
The fix: ``range(0, n, mb)``.

Measured (CPU, OMP_NUM_THREADS=1): the buggy step's gradient is that of the squared error on
rows 0..47 only, over n (rel. ~1e-7); against the whole batch's MSE gradient: scale 0.884, rel.
error 0.191, cosine 0.986 (at initialisation the dropped domain's gradient resembles the
others'). Held-out MSE after 400 steps: 0.690 (buggy) vs 0.264 (fixed); the last domain alone
1.942 vs 0.098.
"""
import torch
import torch.nn as nn

EXPECTED = ("STEP_NOT_OBJECTIVE", "dropped")
QUALITY_GAP = True

FEATURES, DOMAINS, PER_DOMAIN, MICRO = 6, 4, 16, 16
_W = torch.randn(DOMAINS, FEATURES, generator=torch.Generator().manual_seed(5))


def target_fn(x, d):
    w = _W[d]
    return torch.sin((x * w).sum(1, keepdim=True)) + 0.5 * (x[:, :1] * (d[:, None] - 1.5))


def make_batch(gen, per_domain=PER_DOMAIN):
    xs, ys = [], []
    for k in range(DOMAINS):
        x = torch.randn(per_domain, FEATURES, generator=gen)
        d = torch.full((per_domain,), k)
        onehot = nn.functional.one_hot(d, DOMAINS).float()
        xs.append(torch.cat([x, onehot], 1))
        ys.append(target_fn(x, d) + 0.05 * torch.randn(per_domain, 1, generator=gen))
    return torch.cat(xs), torch.cat(ys)


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FEATURES + DOMAINS, 64), nn.LayerNorm(64), nn.GELU(),
                                 nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU(),
                                 nn.Linear(64, 1))

    def forward(self, x):
        return self.net(x)


class Trainer:
    def __init__(self, micro_batch, fixed):
        self.mb = micro_batch
        self.fixed = fixed
        self.criterion = nn.MSELoss()

    def step(self, model, batch, optimizer):
        x, y = batch
        n = x.shape[0]
        optimizer.zero_grad()
        stop = n if self.fixed else n - self.mb
        logged = 0.0
        for start in range(0, stop, self.mb):
            xb, yb = x[start:start + self.mb], y[start:start + self.mb]
            loss = self.criterion(model(xb), yb) * (xb.shape[0] / n)
            loss.backward()
            logged += loss.item()
        optimizer.step()
        return logged


def effective_loss(model, x, y):
    """By hand: squared error summed over rows 0..n-mb-1 only, divided by n."""
    n = x.shape[0]
    keep = n - MICRO
    return ((model(x[:keep]) - y[:keep]) ** 2).sum() / n


def build(fixed: bool) -> dict:
    torch.manual_seed(0)
    model = Regressor()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    x, y = make_batch(torch.Generator().manual_seed(1))
    trainer = Trainer(MICRO, fixed)
    return {"model": model, "loss_fn": nn.MSELoss(), "inputs": x, "targets": y,
            "train_step": trainer.step, "optimizer": optimizer}


def train(fixed: bool, steps: int = 400) -> dict:
    objs = build(fixed)
    model, opt, step = objs["model"], objs["optimizer"], objs["train_step"]
    gen = torch.Generator().manual_seed(2)
    for _ in range(steps):
        step(model, make_batch(gen), opt)
    x, y = make_batch(torch.Generator().manual_seed(99), per_domain=500)
    with torch.no_grad():
        err = (model(x) - y) ** 2
    per_domain = err.reshape(DOMAINS, -1).mean(1).tolist()
    mse = float(err.mean())
    return {"metric": mse, "higher_is_better": False,
            "evidence": f"held-out MSE {mse:.4f}; per domain "
                        + ", ".join(f"{v:.4f}" for v in per_domain)}


if __name__ == "__main__":
    from tests.blind.step_equivalence._common import measure_step
    for fixed in (False, True):
        print(fixed, measure_step(build(fixed), effective_loss), train(fixed))
