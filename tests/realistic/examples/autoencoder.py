"""A convolutional autoencoder reconstructing sparse glyphs (most pixels 0): a ReLU encoder, a
transposed-conv decoder whose output goes through a Sigmoid into ``nn.BCELoss``. Once it has
learned, most outputs sit near 0, where the dark pixels are: the sigmoid's flat end is the
right answer there, and BCE's gradient (p - y per logit) does not vanish through it. The
metric: held-out reconstruction BCE, before and after."""
import torch
from torch import nn

try:
    from .glyphs import glyphs
except ImportError:
    from glyphs import glyphs


class Autoencoder(nn.Module):

    def __init__(self, width=16):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, width, 3, stride=2, padding=1), nn.ReLU(),
                                     nn.Conv2d(width, width, 3, stride=2, padding=1), nn.ReLU())
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(width, width, 4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(width, 1, 4, stride=2, padding=1), nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


def main(seed=0, steps=300, batch=32):
    torch.manual_seed(seed)
    data = torch.Generator().manual_seed(seed)
    train, _ = glyphs(2048, data)
    test, _ = glyphs(256, data)
    model = Autoencoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.BCELoss()

    def reconstruction():
        with torch.no_grad():
            return criterion(model(test), test).item()

    before = reconstruction()
    for step in range(steps):
        x = train[torch.arange(step * batch, (step + 1) * batch) % len(train)]
        optimizer.zero_grad()
        loss = criterion(model(x), x)
        loss.backward()
        optimizer.step()
    return {"reconstruction_before": before, "reconstruction_after": reconstruction()}


def healthy(metrics):
    return metrics["reconstruction_after"] < 0.5 * metrics["reconstruction_before"]


if __name__ == "__main__":
    print(main())
