"""TRANSFORM_ONE_SIDED: a random 90-degree rotation applied to the image of a dict sample but not
to its mask (the keys list names only the image).

Model family: small U-Net-like FCN (conv, pool, upsample, skip) segmenting L-shaped parts on
1x16x16 inspection images, 2-class per-pixel cross-entropy on a long mask, AdamW, a
``train_one_epoch`` function. Idiom: dict samples with extra keys
(``{"image", "mask", "part_id": str, "spacing": tensor(2)}``) and a ``RandomRot90(keys=...)``
transform that rotates ``sample[k]`` for each k in ``keys`` with one ``k = randint(0, 3)``;
the buggy dataset builds ``RandomRot90(keys=("image",))``, the fixed one
``RandomRot90(keys=("image", "mask"))``. A custom collate_fn stacks tensors and keeps the
strings in a list. The test split has no augmentation.

Measured (held-out foreground IoU, higher is better): buggy 0.227 vs fixed 0.964.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

EXPECTED = "TRANSFORM_ONE_SIDED"
S = 16


class RandomRot90:
    def __init__(self, keys):
        self.keys = keys

    def __call__(self, sample):
        k = int(torch.randint(0, 4, ()))
        out = dict(sample)
        for key in self.keys:
            out[key] = torch.rot90(sample[key], k, dims=(-2, -1))
        return out


def _parts(n, gen):
    masks = torch.zeros(n, S, S, dtype=torch.long)
    for i in range(n):
        r, c = (int(v) for v in torch.randint(1, 7, (2,), generator=gen))
        masks[i, r:r + 8, c:c + 3] = 1            # the L's stem
        masks[i, r + 6:r + 9, c:c + 8] = 1        # its foot
    imgs = 1.0 * masks.unsqueeze(1).float() + 0.4 * torch.randn(n, 1, S, S, generator=gen)
    return imgs, masks


class PartsDataset(Dataset):
    def __init__(self, imgs, masks, transform=None):
        self.imgs, self.masks, self.transform = imgs, masks, transform

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, i):
        sample = {"image": self.imgs[i], "mask": self.masks[i], "part_id": f"part-{i:04d}",
                  "spacing": torch.tensor([0.1, 0.1])}
        return self.transform(sample) if self.transform else sample


def collate(items):
    out = {}
    for key in items[0]:
        vals = [it[key] for it in items]
        out[key] = torch.stack(vals) if torch.is_tensor(vals[0]) else vals
    return out


class TinyUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU())
        self.down = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        self.up = nn.Upsample(scale_factor=2)
        self.dec = nn.Sequential(nn.Conv2d(48, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 2, 1))

    def forward(self, x):
        e = self.enc(x)
        return self.dec(torch.cat([e, self.up(self.down(e))], 1))


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    keys = ("image", "mask") if fixed else ("image",)       # BUG: the mask is not rotated
    train = PartsDataset(*_parts(600, gen), transform=RandomRot90(keys=keys))
    return dict(train=train, test=PartsDataset(*_parts(200, gen)))


def train_one_epoch(model, loader, opt):
    for batch in loader:
        loss = nn.functional.cross_entropy(model(batch["image"]), batch["mask"])
        opt.zero_grad()
        loss.backward()
        opt.step()


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = TinyUNet()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = DataLoader(data["train"], batch_size=32, shuffle=True, collate_fn=collate,
                        generator=torch.Generator().manual_seed(1))
    for _epoch in range(6):
        train_one_epoch(model, loader, opt)
    with torch.no_grad():
        b = collate([data["test"][i] for i in range(len(data["test"]))])
        pred = model(b["image"]).argmax(1)
        inter = ((pred == 1) & (b["mask"] == 1)).sum().item()
        union = ((pred == 1) | (b["mask"] == 1)).sum().item()
    iou = inter / union
    return dict(metric=iou, higher_is_better=True, evidence=f"held-out foreground IoU {iou:.3f}")
