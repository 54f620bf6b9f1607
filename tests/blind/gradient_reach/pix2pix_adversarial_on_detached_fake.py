"""pix2pix-style conditional GAN on synthetic 8x8 images, two optimizers, a Monitor per network.

The input is a square mask; the real output fills the mask with a checkerboard of either phase
(a two-mode target: L1 alone averages the phases into grey). The generator (input mask and a
noise channel) is trained on ``BCE(D(x, fake), real) + 1.0 * L1(fake, y)``, the patch
discriminator on real and fake pairs; both Adam.

Bug (kind 2, a term detached from the network it should train): the generator step reuses
``fake.detach()`` from the discriminator step for its adversarial term, so that term sends no
gradient to the generator (only into the discriminator, whose .grad is cleared before its
step) and only the L1 term trains it. Fix: the generator's adversarial term on ``fake``.

Measured without gradhunt (seeded): held-out mode error (mean distance inside the mask to the
nearer checkerboard phase, lower is better) buggy 1.000 (grey) -> fixed
0.157.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = "TERM_DETACHED"

SIDE = 8
STEPS = 200
CHECKER = ((torch.arange(SIDE)[:, None] + torch.arange(SIDE)[None, :]) % 2 * 2 - 1).float()


def _pairs(n, gen):
    mask = torch.zeros(n, 1, SIDE, SIDE)
    for i in range(n):
        r, c = torch.randint(0, SIDE - 4, (2,), generator=gen).tolist()
        mask[i, 0, r:r + 4, c:c + 4] = 1.0
    phase = torch.randint(0, 2, (n, 1, 1, 1), generator=gen).float() * 2 - 1
    return mask, mask * CHECKER * phase


def _mode_error(fake, mask):
    inside = mask.sum()
    err = [((fake - s * mask * CHECKER).abs() * mask).sum((1, 2, 3)) for s in (1.0, -1.0)]
    return (torch.minimum(*err).sum() / inside).item()


def make_generator():
    return nn.Sequential(nn.Conv2d(2, 24, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(24, 24, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(24, 1, 3, padding=1), nn.Tanh())


def make_discriminator():
    return nn.Sequential(nn.Conv2d(2, 32, 3, padding=1), nn.LeakyReLU(0.2),
                         nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
                         nn.Conv2d(32, 1, 3, padding=1))


def _generate(gen_net, mask, noise):
    return gen_net(torch.cat([mask, noise.expand_as(mask)], 1))


def run(*, fixed, monitor=False):
    gen = torch.Generator().manual_seed(7)
    test_mask, _ = _pairs(256, gen)
    test_noise = torch.randn(256, 1, 1, 1, generator=gen)
    torch.manual_seed(0)
    netG, netD = make_generator(), make_discriminator()
    optG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    monitors = []
    if monitor:
        import gradhunt
        monitors = [gradhunt.Monitor(netG, optimizer=optG), gradhunt.Monitor(netD, optimizer=optD)]
    try:
        for step in range(STEPS):
            mask, real = _pairs(32, gen)
            noise = torch.randn(32, 1, 1, 1, generator=gen)
            fake = _generate(netG, mask, noise)
            fake_detached = fake.detach()

            optD.zero_grad()
            d_real = netD(torch.cat([mask, real], 1))
            d_fake = netD(torch.cat([mask, fake_detached], 1))
            lossD = 0.5 * (F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real))
                           + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake)))
            lossD.backward()
            optD.step()

            optG.zero_grad()
            d_out = netD(torch.cat([mask, fake if fixed else fake_detached], 1))
            adversarial = F.binary_cross_entropy_with_logits(d_out, torch.ones_like(d_out))
            lossG = adversarial + 1.0 * F.l1_loss(fake, real)
            lossG.backward()
            optG.step()
            if monitors:
                monitors[0].step(lossG)
                monitors[1].step(lossD)
    finally:
        for m in monitors:
            m.close()
    with torch.no_grad():
        error = _mode_error(_generate(netG, test_mask, test_noise), test_mask)
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
