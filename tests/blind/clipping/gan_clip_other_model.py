"""Small GAN on 2-D data; the discriminator's step clips the generator's parameters.

The data are a correlated 2-D Gaussian (mean (2, -1)); a generator MLP maps 8-D noise to 2-D
points and a discriminator MLP scores them (BCE with logits, the non-saturating generator loss).
Both are trained with SGD + momentum; the discriminator runs at a high rate (0.5, the
generator at 0.001), so each of its steps is clipped with
``clip_grad_norm_(..., max_norm=1.0)``. The buggy discriminator step clips
``generator.parameters()`` (a copy-paste from the generator step): the generator holds only
stale gradients there (its fakes are detached), and the discriminator's own gradients
reach ``d_optimizer.step()`` unclipped. The fixed twin clips ``discriminator.parameters()``.

Measured without gradhunt (error of the generated distribution: distance of its mean and of its
standard deviations to the data's, over 2000 samples; lower is better; NaN or above 100 is
scored 100): buggy NaN -> 100, fixed 0.139.
"""
import math

import torch
from torch import nn

EXPECTED = "CLIP_HAS_NO_EFFECT"

NOISE = 8
STEPS = 600
BATCH = 64
D_LR = 0.5
G_LR = 0.001
MAX_NORM = 1.0
ERROR_CAP = 100.0
MEAN = torch.tensor([2.0, -1.0])
MIX = torch.tensor([[0.6, 0.0], [0.4, 0.3]])


def sample_data(n, gen):
    return torch.randn(n, 2, generator=gen) @ MIX.T + MEAN


def distribution_error(fake, real):
    error = ((fake.mean(0) - real.mean(0)).norm() + (fake.std(0) - real.std(0)).norm()).item()
    if not math.isfinite(error) or error > ERROR_CAP:     # NaN or diverged: the cap
        return ERROR_CAP
    return error


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    generator = nn.Sequential(nn.Linear(NOISE, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                              nn.Linear(64, 2))
    discriminator = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64),
                                  nn.LeakyReLU(0.2), nn.Linear(64, 1))
    g_optimizer = torch.optim.SGD(generator.parameters(), lr=G_LR, momentum=0.9)
    d_optimizer = torch.optim.SGD(discriminator.parameters(), lr=D_LR, momentum=0.9)
    bce = nn.BCEWithLogitsLoss()
    ones, zeros = torch.ones(BATCH, 1), torch.zeros(BATCH, 1)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(discriminator, optimizer=d_optimizer)

    for step in range(STEPS):
        real = sample_data(BATCH, gen)
        fake = generator(torch.randn(BATCH, NOISE, generator=gen))

        d_optimizer.zero_grad()
        d_loss = bce(discriminator(real), ones) + bce(discriminator(fake.detach()), zeros)
        d_loss.backward()
        if fixed:
            nn.utils.clip_grad_norm_(discriminator.parameters(), MAX_NORM)   # fix
        else:
            nn.utils.clip_grad_norm_(generator.parameters(), MAX_NORM)       # bug: other model
        d_optimizer.step()
        if mon is not None:
            mon.step(d_loss)

        g_optimizer.zero_grad()
        g_loss = bce(discriminator(fake), ones)
        g_loss.backward()
        nn.utils.clip_grad_norm_(generator.parameters(), MAX_NORM)
        g_optimizer.step()

    with torch.no_grad():
        fake = generator(torch.randn(2000, NOISE, generator=gen))
    error = distribution_error(fake, sample_data(2000, gen))
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": error, "higher_is_better": False}
