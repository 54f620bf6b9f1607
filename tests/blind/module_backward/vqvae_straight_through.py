"""A small VQ-VAE on 32-D vectors, a Trainer class, RMSprop.

The data are 32-D rows made from 3 latent factors through a fixed random nonlinear map, plus
noise. An MLP encoder maps a row to 2 latent vectors of size 6, each snapped to its nearest of
16 codebook entries; an MLP decoder reconstructs the row. The loss is the VQ-VAE one:
reconstruction + codebook term + 0.25 * commitment term. The buggy quantizer is an
``nn.Module`` whose ``forward`` returns the nearest codebook entries and whose
``backward(self, grad_output)`` returns ``grad_output`` (the straight-through estimator) for
the encoder: autograd never calls it. The reconstruction gradient reaches the codebook through
the lookup but stops at the ``argmin``: the encoder learns only from the commitment term, never
to encode the data. Fix: the straight-through detach idiom in forward,
``z + (quantized - z).detach()``.

Measured (held-out reconstruction MSE, lower is better, without gradhunt): buggy 0.149,
fixed 0.054. (With other codebook sizes the fixed twin sometimes loses codes and the
margin shrinks; 2 groups of 16 codes, 8 epochs, were chosen before running gradhunt.)
"""
import torch
from torch import nn
import torch.nn.functional as F

EXPECTED = "MODULE_BACKWARD_IGNORED"

DIM = 32
CODES = 16
GROUPS = 2
CODE_DIM = 6
EPOCHS = 8
BATCH = 128


def make_data(n, mixing, gen):
    factors = torch.rand(n, 3, generator=gen) * 2 - 1
    x = torch.tanh(factors @ mixing[0]) @ mixing[1]
    return x + 0.05 * torch.randn(n, DIM, generator=gen)


class VectorQuantizer(nn.Module):
    def __init__(self, *, straight_through_in_forward):
        super().__init__()
        self.codebook = nn.Embedding(CODES, CODE_DIM)
        self.codebook.weight.data.uniform_(-1.0 / CODES, 1.0 / CODES)
        self.straight_through_in_forward = straight_through_in_forward

    def forward(self, z):
        flat = z.reshape(-1, CODE_DIM)
        idx = torch.cdist(flat, self.codebook.weight).argmin(1)
        quantized = self.codebook(idx).view_as(z)
        codebook_loss = F.mse_loss(quantized, z.detach())
        commitment_loss = F.mse_loss(z, quantized.detach())
        if self.straight_through_in_forward:
            quantized = z + (quantized - z).detach()          # fix: straight-through in forward
        return quantized, codebook_loss + 0.25 * commitment_loss

    def backward(self, grad_output):      # bug: autograd never calls a Module's backward
        return grad_output                # (the straight-through estimator, meant for z)


class VQVAE(nn.Module):
    def __init__(self, *, fixed):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(),
                                     nn.Linear(128, GROUPS * CODE_DIM))
        self.quantizer = VectorQuantizer(straight_through_in_forward=fixed)
        self.decoder = nn.Sequential(nn.Linear(GROUPS * CODE_DIM, 128), nn.ReLU(),
                                     nn.Linear(128, DIM))

    def forward(self, x):
        z = self.encoder(x).view(-1, GROUPS, CODE_DIM)
        quantized, vq_loss = self.quantizer(z)
        return self.decoder(quantized.flatten(1)), vq_loss


class Trainer:
    def __init__(self, model, optimizer, data, *, monitor):
        self.model, self.optimizer, self.data = model, optimizer, data
        self.monitor = monitor

    def fit(self, epochs):
        gen = torch.Generator().manual_seed(2)
        for _ in range(epochs):
            self.model.train()
            for idx in torch.randperm(len(self.data), generator=gen).split(BATCH):
                loss = self.training_step(self.data[idx])
                if self.monitor is not None:
                    self.monitor.step(loss)

    def training_step(self, batch):
        self.optimizer.zero_grad()
        recon, vq_loss = self.model(batch)
        loss = F.mse_loss(recon, batch) + vq_loss
        loss.backward()
        self.optimizer.step()
        return loss

    @torch.no_grad()
    def evaluate(self, data):
        self.model.eval()
        return F.mse_loss(self.model(data)[0], data).item()


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    mixing = (2.0 * torch.randn(3, 16, generator=gen), torch.randn(16, DIM, generator=gen) / 4)
    train, test = make_data(6000, mixing, gen), make_data(1000, mixing, gen)

    model = VQVAE(fixed=fixed)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=optimizer)
    trainer = Trainer(model, optimizer, train, monitor=mon)
    trainer.fit(EPOCHS)
    mse = trainer.evaluate(test)
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": mse, "higher_is_better": False}
