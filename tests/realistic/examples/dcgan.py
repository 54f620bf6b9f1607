"""DCGAN on 8x8 images of one bright bar on a dark background, scaled to [-1, 1].

As pytorch/examples' dcgan: a transposed-conv generator ending in Tanh, a conv discriminator
ending in Sigmoid, ``nn.BCELoss``, one Adam per network (betas 0.5, 0.999). Each iteration:
``netD.zero_grad()``, D's loss on a real batch (backward), on a detached fake batch (backward,
accumulating), ``optimizerD.step()``; then ``netG.zero_grad()``, G's loss through D
(backward, which also leaves gradients in D that D's next zero_grad clears), ``optimizerG.step()``.
The metric: how far the fakes' mean image is from the reals', before and after.
"""
import torch
from torch import nn

NOISE = 8


def bars(n, generator):
    """Images of one horizontal or vertical bar of width 2 at a random place."""
    images = -torch.ones(n, 1, 8, 8)
    where = torch.randint(0, 7, (n,), generator=generator)
    vertical = torch.rand(n, generator=generator) < 0.5
    for i in range(n):
        k = int(where[i])
        if vertical[i]:
            images[i, 0, :, k:k + 2] = 1.0
        else:
            images[i, 0, k:k + 2, :] = 1.0
    return images


class Generator(nn.Module):

    def __init__(self, width=32):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NOISE, width, 4, 1, 0, bias=False), nn.BatchNorm2d(width),
            nn.ReLU(True),
            nn.ConvTranspose2d(width, 1, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):

    def __init__(self, width=32):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, width, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(width, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, x):
        return self.main(x).view(-1, 1).squeeze(1)


def _init(module):
    if "Conv" in type(module).__name__:
        nn.init.normal_(module.weight, 0.0, 0.02)
    elif "BatchNorm" in type(module).__name__:
        nn.init.normal_(module.weight, 1.0, 0.02)
        nn.init.zeros_(module.bias)


def mean_image_gap(netG, real, generator):
    netG.eval()
    with torch.no_grad():
        fake = netG(torch.randn(256, NOISE, 1, 1, generator=generator))
    netG.train()
    return float((fake.mean(0) - real.mean(0)).abs().mean())


def main(seed=0, iterations=300, batch=32):
    torch.manual_seed(seed)
    data = torch.Generator().manual_seed(seed)
    netG, netD = Generator(), Discriminator()
    netG.apply(_init)
    netD.apply(_init)
    criterion = nn.BCELoss()
    optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    reference = bars(256, data)
    before = mean_image_gap(netG, reference, torch.Generator().manual_seed(1))
    for _ in range(iterations):
        real = bars(batch, data)
        netD.zero_grad()
        label = torch.ones(batch)
        errD_real = criterion(netD(real), label)
        errD_real.backward()
        fake = netG(torch.randn(batch, NOISE, 1, 1))
        label.fill_(0.0)
        errD_fake = criterion(netD(fake.detach()), label)
        errD_fake.backward()
        optimizerD.step()

        netG.zero_grad()
        label.fill_(1.0)
        errG = criterion(netD(fake), label)
        errG.backward()
        optimizerG.step()
    after = mean_image_gap(netG, reference, torch.Generator().manual_seed(1))
    return {"mean_image_gap_before": before, "mean_image_gap_after": after,
            "last_loss_D": (errD_real + errD_fake).item(), "last_loss_G": errG.item()}


def healthy(metrics):
    """G's images moved onto the data's (the mean image gap at most half of where it
    began) and neither player won outright (D's loss not at 0, G's not exploding)."""
    return (metrics["mean_image_gap_after"] < metrics["mean_image_gap_before"] / 2
            and metrics["last_loss_D"] > 0.05 and metrics["last_loss_G"] < 10)


if __name__ == "__main__":
    print(main())
