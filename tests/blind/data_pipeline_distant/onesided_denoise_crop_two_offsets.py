"""TRANSFORM_ONE_SIDED: a denoising dataset whose random crop draws its offset separately for the
noisy input and the clean target.

Model family: residual convolutional denoiser (3 conv layers predicting the noise) on 1x24x24
smooth fields (low-pass random textures), target = the clean image, same shape as the input;
Adam, plain loop over a DataLoader. Idiom: a ``PairedCrop(size)`` transform whose
``__call__(*tensors)`` draws ONE offset and crops every tensor it is given; the buggy Dataset
calls it twice (``x = self.crop(noisy)[0]; y = self.crop(clean)[0]``), the fixed one once
(``x, y = self.crop(noisy, clean)``). The buggy target is the clean image somewhere else.
Evaluated on full-size held-out images (fully convolutional).

Measured (held-out MSE against the clean images, lower is better): buggy 0.508 vs fixed 0.0218
(noisy input 0.0896).
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

EXPECTED = "TRANSFORM_ONE_SIDED"
S, CROP, SIGMA = 24, 16, 0.3


def _fields(n, gen):
    z = torch.randn(n, 1, S + 8, S + 8, generator=gen)
    k = torch.ones(1, 1, 5, 5) / 25
    x = nn.functional.conv2d(nn.functional.conv2d(z, k), k)
    x = x / x.std()
    return x, x + SIGMA * torch.randn(x.shape, generator=gen)


class PairedCrop:
    def __init__(self, size):
        self.size = size

    def __call__(self, *tensors):
        h, w = tensors[0].shape[-2:]
        i = int(torch.randint(0, h - self.size + 1, ()))
        j = int(torch.randint(0, w - self.size + 1, ()))
        return [t[..., i:i + self.size, j:j + self.size] for t in tensors]


class DenoiseDataset(Dataset):
    def __init__(self, clean, noisy, crop=None, joint=True):
        self.clean, self.noisy, self.crop, self.joint = clean, noisy, crop, joint

    def __len__(self):
        return len(self.clean)

    def __getitem__(self, i):
        noisy, clean = self.noisy[i], self.clean[i]
        if self.crop is not None:
            if self.joint:
                noisy, clean = self.crop(noisy, clean)
            else:                                          # BUG: two draws, two offsets
                noisy = self.crop(noisy)[0]
                clean = self.crop(clean)[0]
        return noisy, clean


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    c_train, n_train = _fields(600, gen)
    c_test, n_test = _fields(200, gen)
    train = DenoiseDataset(c_train, n_train, crop=PairedCrop(CROP), joint=fixed)
    return dict(train=train, test=DenoiseDataset(c_test, n_test))


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 24, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(24, 24, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(24, 1, 3, padding=1))

    def forward(self, x):
        return x - self.body(x)


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = Denoiser()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    loader = DataLoader(data["train"], batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(1))
    for _epoch in range(6):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        xb, yb = next(iter(DataLoader(data["test"], batch_size=200)))
        mse = nn.functional.mse_loss(model(xb), yb).item()
        base = nn.functional.mse_loss(xb, yb).item()
    return dict(metric=mse, higher_is_better=False,
                evidence=f"held-out MSE {mse:.4f} (noisy input {base:.4f})")
