"""TRANSFORM_ONE_SIDED: a random crop moves the image but not its keypoint target.

Model family: CNN keypoint regressor (conv-ReLU-pool x2, linear head to (row, col) in [-1, 1]),
RMSprop, a ``fit`` function with epochs over a DataLoader. Idiom: the arrays live in a
``TensorDataset`` of 1x24x24 canvases and keypoint coordinates (given in the 16x16 centre-crop
frame that the test split uses); a ``RandomCropKeypoints`` Dataset wraps it and cuts a random
16x16 window ``img[:, top:top+16, left:left+16]`` from each canvas. The bug: it returns the
keypoint unchanged, as if the window were the centre crop, so the target is off by up to 4
pixels in each direction, differently on every draw. The fixed twin subtracts the window's offset
from the centre crop's, ``kp - (top - 4, left - 4)``. The test split is centre-cropped.

Measured (held-out mean keypoint error in pixels, lower is better): 1.94 px (buggy) vs 0.90 px (fixed).
"""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

EXPECTED = "TRANSFORM_ONE_SIDED"
CANVAS, CROP = 24, 16
MARGIN = (CANVAS - CROP) // 2


class RandomCropKeypoints(Dataset):
    def __init__(self, arrays, adjust_keypoint):
        self.arrays, self.adjust_keypoint = arrays, adjust_keypoint

    def __len__(self):
        return len(self.arrays)

    def __getitem__(self, i):
        img, kp = self.arrays[i]
        top, left = torch.randint(0, CANVAS - CROP + 1, (2,)).tolist()
        window = img[:, top:top + CROP, left:left + CROP]
        if self.adjust_keypoint:
            kp = kp - torch.tensor([top - MARGIN, left - MARGIN], dtype=kp.dtype)
        return window, kp                          # buggy twin: kp still in centre-crop frame


class CenterCrop(Dataset):
    def __init__(self, arrays):
        self.arrays = arrays

    def __len__(self):
        return len(self.arrays)

    def __getitem__(self, i):
        img, kp = self.arrays[i]
        return img[:, MARGIN:MARGIN + CROP, MARGIN:MARGIN + CROP], kp


def _make(n, gen):
    kp = torch.rand(n, 2, generator=gen) * 8 + 4            # inside the centre crop, >=4 px in
    ys = torch.arange(CANVAS, dtype=torch.float32).view(1, CANVAS, 1)
    xs = torch.arange(CANVAS, dtype=torch.float32).view(1, 1, CANVAS)
    cy = (kp[:, 0] + MARGIN).view(n, 1, 1)
    cx = (kp[:, 1] + MARGIN).view(n, 1, 1)
    spot = torch.exp(-((ys - cy) ** 2 + (xs - cx) ** 2) / 3.0)
    img = 2.5 * spot + 0.5 * torch.randn(n, CANVAS, CANVAS, generator=gen)
    img = (img - 0.09) / 0.6                                 # stored standardised
    return img.unsqueeze(1), kp


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    train_arrays = TensorDataset(*_make(1000, gen))
    test_arrays = TensorDataset(*_make(300, gen))
    train = RandomCropKeypoints(train_arrays, adjust_keypoint=fixed)    # BUG when fixed=False
    test = CenterCrop(test_arrays)
    return dict(train=train, test=test)


class KeypointNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.head = nn.Linear(32 * 4 * 4, 2)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.head(x.flatten(1))


def to_unit(kp):
    return kp / (CROP - 1) * 2 - 1


def fit(model, dataset, epochs=8):
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    loader = DataLoader(dataset, batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(1))
    for _epoch in range(epochs):
        for img, kp in loader:
            loss = F.mse_loss(model(img), to_unit(kp))
            opt.zero_grad()
            loss.backward()
            opt.step()


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    model = KeypointNet()
    fit(model, data["train"])
    model.eval()
    with torch.no_grad():
        img, kp = next(iter(DataLoader(data["test"], batch_size=len(data["test"]))))
        pred = (model(img) + 1) / 2 * (CROP - 1)
        err = (pred - kp).norm(dim=1).mean().item()
    return dict(metric=err, higher_is_better=False,
                evidence=f"held-out mean keypoint error {err:.2f} px (16x16 crop)")
