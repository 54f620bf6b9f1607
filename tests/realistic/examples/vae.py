"""A VAE as pytorch/examples' vae: a ReLU MLP encoder to (mu, logvar), z reparameterised, a
ReLU MLP decoder ending in a Sigmoid, loss = summed binary cross-entropy of the reconstruction
+ KL divergence, per batch. On the 8x8 glyphs. The metric: held-out reconstruction BCE per
image, before and after."""
import torch
import torch.nn.functional as F
from torch import nn

try:
    from .glyphs import glyphs
except ImportError:
    from glyphs import glyphs


class VAE(nn.Module):

    def __init__(self, pixels=64, hidden=128, latent=8):
        super().__init__()
        self.fc1 = nn.Linear(pixels, hidden)
        self.fc21, self.fc22 = nn.Linear(hidden, latent), nn.Linear(hidden, latent)
        self.fc3 = nn.Linear(latent, hidden)
        self.fc4 = nn.Linear(hidden, pixels)
        self.relu, self.sigmoid = nn.ReLU(), nn.Sigmoid()

    def encode(self, x):
        h = self.relu(self.fc1(x))
        return self.fc21(h), self.fc22(h)

    def decode(self, z):
        return self.sigmoid(self.fc4(self.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 64))
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.decode(z), mu, logvar


def loss_function(recon, x, mu, logvar):
    bce = F.binary_cross_entropy(recon, x.view(-1, 64), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def main(seed=0, steps=300, batch=32):
    torch.manual_seed(seed)
    data = torch.Generator().manual_seed(seed)
    train, _ = glyphs(2048, data)
    test, _ = glyphs(256, data)
    model = VAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def reconstruction():
        model.eval()
        with torch.no_grad():
            mu, _ = model.encode(test.view(-1, 64))
            return F.binary_cross_entropy(model.decode(mu), test.view(-1, 64),
                                          reduction="sum").item() / len(test)

    before = reconstruction()
    for step in range(steps):
        x = train[torch.arange(step * batch, (step + 1) * batch) % len(train)]
        optimizer.zero_grad()
        recon, mu, logvar = model(x)
        loss = loss_function(recon, x, mu, logvar)
        loss.backward()
        optimizer.step()
    return {"reconstruction_before": before, "reconstruction_after": reconstruction()}


def healthy(metrics):
    return metrics["reconstruction_after"] < 0.6 * metrics["reconstruction_before"]


if __name__ == "__main__":
    print(main())
