"""Healthy: an MLP GAN on 1-D waveforms, the detach where it belongs, a Monitor per network.

Real samples are 16-point sine waves of random phase and amplitude in [0.5, 1]. The
discriminator step scores ``fake.detach()`` (right: the generator must not move in D's step),
the generator step scores ``fake`` itself (right: its adversarial term is its only loss). Two
Adam optimizers, one Monitor per network. Metric: mean |amplitude error| of generated waves
(their half peak-to-peak against the nearest allowed amplitude), lower is better.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = None
POINTS, NOISE = 16, 8
GRID = torch.linspace(0, 2 * math.pi, POINTS + 1)[:-1]


def _real(n, gen):
    phase = 2 * math.pi * torch.rand(n, 1, generator=gen)
    amp = 0.5 + 0.5 * torch.rand(n, 1, generator=gen)
    return amp * torch.sin(GRID + phase)


def run(*, fixed=True, monitor=False):
    gen = torch.Generator().manual_seed(10)
    torch.manual_seed(0)
    netG = nn.Sequential(nn.Linear(NOISE, 64), nn.ReLU(), nn.Linear(64, POINTS), nn.Tanh())
    netD = nn.Sequential(nn.Linear(POINTS, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))
    optG = torch.optim.Adam(netG.parameters(), lr=1e-3, betas=(0.5, 0.999))
    optD = torch.optim.Adam(netD.parameters(), lr=1e-3, betas=(0.5, 0.999))
    monitors = []
    if monitor:
        import gradhunt
        monitors = [gradhunt.Monitor(netG, optimizer=optG), gradhunt.Monitor(netD, optimizer=optD)]
    try:
        for step in range(300):
            real = _real(64, gen)
            fake = netG(torch.randn(64, NOISE, generator=gen))
            optD.zero_grad()
            d_real, d_fake = netD(real), netD(fake.detach())
            lossD = (F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real))
                     + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake)))
            lossD.backward()
            optD.step()
            optG.zero_grad()
            d_out = netD(fake)
            lossG = F.binary_cross_entropy_with_logits(d_out, torch.ones_like(d_out))
            lossG.backward()
            optG.step()
            if monitors:
                monitors[0].step(lossG)
                monitors[1].step(lossD)
    finally:
        for m in monitors:
            m.close()
    with torch.no_grad():
        waves = netG(torch.randn(512, NOISE, generator=gen))
        amp = (waves.max(1)[0] - waves.min(1)[0]) / 2
        error = (amp - amp.clamp(0.5, 1.0)).abs().mean().item()
    report = None
    if monitors:
        report = _Reports(monitors[0].report(), monitors[1].report())
    return {"report": report, "metric": error, "higher_is_better": False}


class _Reports:
    """The generator's report, then the discriminator's: findings in that order."""

    def __init__(self, *reports):
        self.reports = reports
        self.findings = [f for r in reports for f in r.findings]

    def __str__(self):
        return "\n\n".join(str(r) for r in self.reports)
