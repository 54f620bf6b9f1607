"""Convolutional autoencoder with an auxiliary edge feature-matching loss, DataLoader epochs.

Synthetic 16x16 images of 1-3 bright rectangles; the autoencoder (conv encoder, a 12-unit
bottleneck, transposed-conv decoder) is trained by Adam on ``MSE(recon, x) + 2 * L1(edges(recon),
edges(x))``, where ``edges`` is a fixed Sobel filter bank (the feature-matching term is there
because MSE alone blurs the rectangles' borders).

Bug (kind 2, a term detached from the network it should train): the edge term is computed on
``recon.detach()`` (the detached copy kept for the image log), so it sends no gradient to the
autoencoder and only the MSE trains it. Fix: compute the edge term on ``recon``.

Measured without gradhunt (seeded): held-out edge error (mean |edges(recon) - edges(x)|, lower is
better) buggy 0.606 -> fixed 0.482 (0.795 of it).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "TERM_DETACHED"

SIDE = 16
EPOCHS = 3
EDGE_WEIGHT = 2.0
SOBEL = torch.tensor([[[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]],
                      [[-1.0, -2.0, -1.0], [0.0, 0.0, 0.0], [1.0, 2.0, 1.0]]])[:, None]


def edges(img):
    return F.conv2d(img, SOBEL, padding=1)


def _images(n, gen):
    x = torch.zeros(n, 1, SIDE, SIDE)
    for i in range(n):
        for _ in range(int(torch.randint(1, 4, (1,), generator=gen))):
            r0, c0 = torch.randint(0, SIDE - 4, (2,), generator=gen).tolist()
            h, w = torch.randint(3, 8, (2,), generator=gen).tolist()
            x[i, 0, r0:r0 + h, c0:c0 + w] = 1.0
    return x


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Flatten(), nn.Linear(32 * 4 * 4, 12))
        self.decoder = nn.Sequential(
            nn.Linear(12, 32 * 4 * 4), nn.ReLU(), nn.Unflatten(1, (32, 4, 4)),
            nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(16, 1, 4, stride=2, padding=1))

    def forward(self, x):
        return self.decoder(self.encoder(x))


def run(*, fixed, monitor=False):
    gen = torch.Generator().manual_seed(5)
    train_x, test_x = _images(768, gen), _images(256, gen)
    torch.manual_seed(0)
    model = AutoEncoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    loader = DataLoader(TensorDataset(train_x), batch_size=24, shuffle=True,
                        generator=torch.Generator().manual_seed(6))
    mon = None
    if monitor:
        import gradhunt
        mon = gradhunt.Monitor(model, optimizer=optimizer)
    logged = []
    try:
        for epoch in range(EPOCHS):
            for (xb,) in loader:
                recon = model(xb)
                shown = recon.detach()
                if len(logged) < 4:
                    logged.append(shown[:1])
                feature = edges(recon if fixed else shown)
                loss = F.mse_loss(recon, xb) + EDGE_WEIGHT * F.l1_loss(feature, edges(xb))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if mon is not None:
                    mon.step(loss)
    finally:
        if mon is not None:
            mon.close()
    with torch.no_grad():
        edge_error = F.l1_loss(edges(model(test_x)), edges(test_x)).item()
    return {"report": mon.report() if mon is not None else None,
            "metric": edge_error, "higher_is_better": False}
