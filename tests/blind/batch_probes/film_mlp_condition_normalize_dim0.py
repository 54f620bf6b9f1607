"""A FiLM-conditioned MLP regressor (dict inputs ``features``, ``condition``: a sensor reading
and the operating condition it was taken under); the condition vector is L2-normalised with
``F.normalize(condition, dim=0)`` -- over the batch -- where the per-example ``dim=1`` was
meant. A ``train_step(batch)`` function over random mini-batches, SGD with momentum.
Bug real: MSE when each reading is predicted on its own."""
import copy
import functools

import torch
import torch.nn.functional as F
from torch import nn

from tests.blind.batch_probes._common import seeded

EXPECTED = "BATCH_MIXING"


def make_data(n, gen):
    """The target is the features' response scaled and shifted by the condition's direction
    (only the direction matters: the condition's length is a sensor gain)."""
    x = torch.randn(n, 6, generator=gen)
    c = torch.randn(n, 3, generator=gen)
    c = c * (0.5 + 2 * torch.rand(n, 1, generator=gen))
    u = F.normalize(c, dim=1)
    y = (x[:, :3] * u).sum(1) * 2 + u[:, 0] - 0.5 * x[:, 3] * u[:, 1]
    return x, c, y.unsqueeze(1)


class FiLMRegressor(nn.Module):
    def __init__(self, fixed, hidden=48):
        super().__init__()
        self.fixed = fixed
        self.inp = nn.Linear(6, hidden)
        self.film = nn.Linear(3, 2 * hidden)
        self.out = nn.Sequential(nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, 1))

    def forward(self, features, condition):
        u = F.normalize(condition, dim=1 if self.fixed else 0)
        gamma, beta = self.film(u).chunk(2, dim=1)
        return self.out(self.inp(features) * (1 + gamma) + beta)


@functools.lru_cache(maxsize=None)
def _fit(fixed):
    torch.manual_seed(0)
    gen = seeded(21)
    x, c, y = make_data(2048, gen)
    model = FiLMRegressor(fixed)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train_step(batch):
        features, condition, target = batch
        loss = F.mse_loss(model(features, condition), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    for _step in range(1500):
        i = torch.randint(0, len(y), (32,), generator=gen)
        train_step((x[i], c[i], y[i]))
    model.eval()
    return model, make_data(400, seeded(22))


def build(fixed):
    model, (x, c, _y) = _fit(fixed)
    return dict(model=copy.deepcopy(model),
                inputs={"features": x[:16].clone(), "condition": c[:16].clone()}, options={})


def train(fixed):
    model, (x, c, y) = _fit(fixed)
    with torch.no_grad():
        single = torch.cat([model(x[i:i + 1], c[i:i + 1]) for i in range(len(y))])
        batch32 = torch.cat([model(x[s:s + 32], c[s:s + 32]) for s in range(0, len(y), 32)])
    single_mse, batch_mse = F.mse_loss(single, y).item(), F.mse_loss(batch32, y).item()
    return dict(metric=single_mse, higher_is_better=False,
                evidence=dict(single_mse=round(single_mse, 4), batch32_mse=round(batch_mse, 4),
                              target_var=round(y.var().item(), 3)))
