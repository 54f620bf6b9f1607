"""Healthy: a GAN on a ring of 8 Gaussians, watched from the generator's side.

The generator's gradient comes through a discriminator that changes every step, so its norm
swings by large factors from one step to the next; that is how GANs train, not a fault.
Idiom: alternating D and G steps in one loop, Adam(betas=(0.5, 0.999)) for both, BCE with logits.
"""
import math

import torch
from torch import nn

from tests.blind.step_guard._common import execute

KIND = "healthy"
BAD_STEPS = frozenset()
HIGHER_IS_BETTER = False
BASELINE = 1.0            # mean distance to the nearest mode of the untrained generator is above
STEPS, BATCH = 300, 64
MODES = torch.tensor([[2 * math.cos(2 * math.pi * k / 8), 2 * math.sin(2 * math.pi * k / 8)]
                      for k in range(8)])


def _real(n, g):
    return MODES[torch.randint(0, 8, (n,), generator=g)] + 0.05 * torch.randn(n, 2, generator=g)


def run(fixed=True, *, guard=None, guard_replay=False, **reference):
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                        nn.Linear(64, 2))
    disc = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64),
                         nn.LeakyReLU(0.2), nn.Linear(64, 1))
    g_opt = torch.optim.Adam(gen.parameters(), lr=1e-3, betas=(0.5, 0.999))
    d_opt = torch.optim.Adam(disc.parameters(), lr=1e-3, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    g = torch.Generator().manual_seed(2)

    def train(control):
        for _ in range(STEPS):
            real = _real(BATCH, g)
            fake = gen(torch.randn(BATCH, 4, generator=g))
            d_opt.zero_grad()
            d_loss = bce(disc(real), torch.ones(BATCH, 1)) + \
                bce(disc(fake.detach()), torch.zeros(BATCH, 1))
            d_loss.backward()
            d_opt.step()
            g_opt.zero_grad()
            g_loss = bce(disc(fake), torch.ones(BATCH, 1))
            g_loss.backward()
            control.step(g_opt, g_loss)

    def evaluate():
        samples = gen(torch.randn(1000, 4, generator=torch.Generator().manual_seed(50)))
        return torch.cdist(samples, MODES).min(1).values.mean()

    return execute(gen, g_opt, train, evaluate, guard=guard, guard_replay=guard_replay,
                   **reference)
