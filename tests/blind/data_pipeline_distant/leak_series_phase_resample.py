"""DATA_LEAKAGE (near-duplicate): a test set made by re-sampling the training recordings with a
tiny phase shift.

Model family: MLP (64 samples -> 256 -> 256 -> 3) on vibration recordings
of rotating machines, 3 condition classes from the dominant frequency band, 30% of the labels
wrong (technician's notes). Idiom: a ``Dataset`` subclass over a list of recordings (dicts with
``"signal"`` and ``"label"``); a ``train_step`` function, Adam, DataLoader epochs.
Bug: "we have no second recording campaign", so the test list is built by re-sampling 200 of
the training recordings at ``t + 0.3`` samples (``np.interp`` of the stored signal), keeping
their labels: every test item is a near-duplicate of a training item (same noise, same wrong
label). The network memorises the noisy labels and the reported accuracy is far above its real
one. Fix: re-sample recordings of machines not in the training list (a held-out pool) instead.

Measured (reported test accuracy vs accuracy on fresh recordings):
buggy 0.955 vs 0.561 (gap +0.394); fixed 0.545 vs 0.561 (gap -0.016).
"""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

EXPECTED = "DATA_LEAKAGE"
KEYWORD = "near-duplicate"
T = 64
NOISE = 0.30


def _recordings(n, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(T)
    out = []
    for _ in range(n):
        label = int(rng.integers(3))
        f = (0.04 + 0.05 * label) + 0.02 * rng.random()
        sig = (np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
               + 0.6 * np.sin(2 * np.pi * rng.uniform(0.02, 0.2) * t + rng.uniform(0, 2 * np.pi))
               + 0.5 * rng.standard_normal(T))
        if rng.random() < NOISE:
            label = int((label + rng.integers(1, 3)) % 3)
        out.append({"signal": sig.astype(np.float32), "label": label, "machine": len(out)})
    return out


def _resample(recs, shift=0.3):
    t = np.arange(T)
    return [{"signal": np.interp(t + shift, t, r["signal"]).astype(np.float32),
             "label": r["label"], "machine": r["machine"]} for r in recs]


class Recordings(Dataset):
    def __init__(self, recs):
        self.recs = recs

    def __len__(self):
        return len(self.recs)

    def __getitem__(self, i):
        r = self.recs[i]
        return torch.from_numpy(r["signal"]), r["label"]


def build(fixed: bool):
    train_recs = _recordings(600, seed=0)
    pool = _recordings(200, seed=1)                       # machines never in training
    rng = np.random.default_rng(2)
    if fixed:
        test_recs = _resample(pool)
    else:                                                 # BUG: re-sampled training recordings
        test_recs = _resample([train_recs[i] for i in rng.choice(600, 200, replace=False)])
    return dict(train=Recordings(train_recs), test=Recordings(test_recs))


def train_step(model, batch, opt):
    x, y = batch
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


@torch.no_grad()
def _accuracy(model, ds):
    x, y = next(iter(DataLoader(ds, batch_size=len(ds))))
    return (model(x).argmax(1) == y).float().mean().item()


def train(fixed: bool):
    torch.manual_seed(0)
    data = build(fixed)
    loader = DataLoader(data["train"], batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(3))
    model = nn.Sequential(nn.Linear(T, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _epoch in range(40):
        for batch in loader:
            train_step(model, batch, opt)
    reported = _accuracy(model, data["test"])
    honest = _accuracy(model, Recordings(_recordings(1000, seed=77)))
    return dict(metric=honest, higher_is_better=True, reported=reported, honest=honest,
                evidence=f"reported test accuracy {reported:.3f}, on fresh recordings "
                         f"{honest:.3f} (gap {reported - honest:+.3f})")
