"""CNN on 3x12x12 colour images with noisy annotations (about 30% of the labels are wrong, as
from crowd workers); offline augmentation (each source image saved as 4 jittered copies:
a shift of up to one pixel, brightness jitter, pixel noise) into one ``TensorDataset``,
``torch.utils.data.random_split`` 80/20, plain loop over a DataLoader, SGD with momentum.

Bug: the augmented pool is split, so the 4 copies of one source image land on both sides: the
test set is mostly near-duplicates of training images, with the same (sometimes wrong) label
the network memorised. The reported test accuracy is inflated well above what the model does
on new images. Fix: ``random_split`` the SOURCE images first, then augment each side.

Measured (reported test accuracy vs accuracy on fresh images with the same label noise):
buggy 0.875 vs 0.677 (gap +0.198); fixed 0.729 vs 0.750 (gap -0.021).
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset, random_split

EXPECTED = "DATA_LEAKAGE"
KEYWORD = "near-duplicate"
N_SOURCE = 300
COPIES = 4
CLASSES = 3
LABEL_NOISE = 0.3


def _sources(n, seed):
    """Per-image random texture plus a weak colour cue for the class; noisy labels."""
    g = torch.Generator().manual_seed(seed)
    y_true = torch.randint(0, CLASSES, (n,), generator=g)
    img = torch.randn(n, 3, 12, 12, generator=g)
    img[torch.arange(n), y_true] += 0.6
    img = img - 0.2
    flip = torch.rand(n, generator=g) < LABEL_NOISE
    y = torch.where(flip, torch.randint(0, CLASSES, (n,), generator=g), y_true)
    return img, y


def _augment(img, y, copies, seed):
    g = torch.Generator().manual_seed(seed)
    out_x, out_y = [], []
    for _ in range(copies):
        dx, dy = [int(v) for v in torch.randint(-1, 2, (2,), generator=g)]
        x = torch.roll(img, shifts=(dy, dx), dims=(2, 3))
        x = x * (1 + 0.1 * torch.randn(len(img), 1, 1, 1, generator=g))
        x = x + 0.1 * torch.randn(x.shape, generator=g)
        out_x.append(x)
        out_y.append(y)
    return TensorDataset(torch.cat(out_x), torch.cat(out_y))


def build(fixed: bool):
    img, y = _sources(N_SOURCE, seed=0)
    split_gen = torch.Generator().manual_seed(1)
    if fixed:
        src_train, src_test = random_split(range(N_SOURCE), [0.8, 0.2], generator=split_gen)
        tr, te = list(src_train), list(src_test)
        train_ds = _augment(img[tr], y[tr], COPIES, seed=2)
        test_ds = _augment(img[te], y[te], COPIES, seed=3)
    else:
        pool = _augment(img, y, COPIES, seed=2)
        train_ds, test_ds = random_split(pool, [0.8, 0.2], generator=split_gen)   # BUG
    return dict(train=train_ds, test=test_ds)


def _accuracy(model, ds):
    x = torch.stack([ds[i][0] for i in range(len(ds))])
    y = torch.stack([ds[i][1] for i in range(len(ds))])
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def train(fixed: bool):
    torch.manual_seed(0)
    parts = build(fixed)
    loader = DataLoader(parts["train"], batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(4))
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Flatten(),
        nn.Linear(32 * 6 * 6, 128), nn.ReLU(), nn.Linear(128, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _epoch in range(15):
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    model.eval()
    reported = _accuracy(model, parts["test"])
    hx, hy = _sources(300, seed=50)
    honest = _accuracy(model, TensorDataset(hx, hy))
    return dict(metric=honest, higher_is_better=True, reported=reported, honest=honest,
                evidence=f"reported test accuracy {reported:.3f}, on fresh images {honest:.3f} "
                         f"(gap {reported - honest:+.3f})")

