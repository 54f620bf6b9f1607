"""A CNN on small images with a metadata vector (dict inputs ``image``, ``meta``); the metadata
branch standardises its input by hand with the batch's own mean and std (``m.mean(0)``), where
the dataset's statistics were meant. Plain loop over a DataLoader of dict batches, Adam.
Bug real: accuracy on single-example inference (how the model is served)."""
import copy
import functools

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from tests.blind.batch_probes._common import seeded

EXPECTED = "BATCH_MIXING"


def make_data(n, gen):
    """Class = whether the image's blob brightness plus the patient's age-like metadata score
    exceeds a threshold: both inputs carry part of the label."""
    meta = torch.randn(n, 4, generator=gen) * torch.tensor([8.0, 2.0, 1.0, 0.5]) + \
        torch.tensor([50.0, 3.0, 0.0, 1.0])
    bright = torch.rand(n, generator=gen)
    image = torch.randn(n, 1, 12, 12, generator=gen) * 0.3
    image[:, :, 4:8, 4:8] += bright.view(n, 1, 1, 1) * 2
    score = (meta[:, 0] - 50) / 8 + (meta[:, 1] - 3) / 2 + 2 * (bright - 0.5)
    return image, meta, (score > 0).long()


class Rows(Dataset):
    def __init__(self, image, meta, y):
        self.image, self.meta, self.y = image, meta, y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"image": self.image[i], "meta": self.meta[i], "label": self.y[i]}


class ImageMetaNet(nn.Module):
    def __init__(self, fixed, meta_mean, meta_std):
        super().__init__()
        self.fixed = fixed
        self.register_buffer("meta_mean", meta_mean)
        self.register_buffer("meta_std", meta_std)
        self.conv = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.meta_mlp = nn.Sequential(nn.Linear(4, 16), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(8 + 16, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, image, meta):
        if self.fixed:
            meta = (meta - self.meta_mean) / self.meta_std
        else:
            meta = (meta - meta.mean(0)) / (meta.std(0, unbiased=False) + 1e-5)
        return self.head(torch.cat([self.conv(image), self.meta_mlp(meta)], dim=1))


@functools.lru_cache(maxsize=None)
def _fit(fixed):
    torch.manual_seed(0)
    gen = seeded(1)
    image, meta, y = make_data(1024, gen)
    model = ImageMetaNet(fixed, meta.mean(0), meta.std(0))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loader = DataLoader(Rows(image, meta, y), batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(2))
    for _epoch in range(8):
        for batch in loader:
            loss = F.cross_entropy(model(batch["image"], batch["meta"]), batch["label"])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    return model, make_data(400, seeded(3))


def build(fixed):
    model, (image, meta, _y) = _fit(fixed)
    return dict(model=copy.deepcopy(model),
                inputs={"image": image[:16].clone(), "meta": meta[:16].clone()}, options={})


def train(fixed):
    model, (image, meta, y) = _fit(fixed)
    with torch.no_grad():
        batched = (model(image, meta).argmax(1) == y).float().mean().item()
        single = torch.stack([model(image[i:i + 1], meta[i:i + 1])[0] for i in range(len(y))])
        single = (single.argmax(1) == y).float().mean().item()
    return dict(metric=single, higher_is_better=True,
                evidence=dict(single_example_acc=round(single, 3),
                              batch_400_acc=round(batched, 3)))
