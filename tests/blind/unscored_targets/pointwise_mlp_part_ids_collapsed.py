"""A shared per-point MLP with LayerNorm (PointNet without the pooling) labelling the parts of
point clouds, one label per point, trained with ``optimizer.step(closure)`` and SGD with
Nesterov momentum.

Bug: the data set stores part ids as 10, 20, ..., 60 and the loader maps them with
``raw // 20`` (the step of an older export) instead of ``raw // 10 - 1``: the per-point labels
take only the values 0-3 while the head has 6 classes, parts 1 and 2 (and 3 and 4) merge, and
classes 4 and 5 never occur in a target. Fixed: ``raw // 10 - 1``.

Measured without gradhunt (held-out per-point accuracy against the true parts):
buggy 0.322, fixed 0.977.
"""
import numpy as np
import torch
from torch import nn

import gradhunt

EXPECTED = "LABEL_RANGE"
NUM_PARTS = 6
POINTS = 128


def make_clouds(n, rng):
    """Points on a jittered cylinder; the part is the sextant of the angle around its axis."""
    angle = rng.uniform(0, 2 * np.pi, size=(n, POINTS))
    height = rng.uniform(-1, 1, size=(n, POINTS))
    radius = rng.uniform(0.8, 1.2, size=(n, 1))
    xyz = np.stack([radius * np.cos(angle), radius * np.sin(angle), height], axis=-1)
    xyz += rng.normal(0, 0.03, size=xyz.shape)
    part = (angle // (2 * np.pi / NUM_PARTS)).astype(np.int64)
    raw_ids = 10 * (part + 1)                      # stored as 10, 20, ..., 60
    return torch.tensor(xyz, dtype=torch.float32), torch.from_numpy(raw_ids), torch.from_numpy(part)


def labels_from_raw(raw_ids, fixed):
    return raw_ids // 10 - 1 if fixed else raw_ids // 20


def build_model():
    return nn.Sequential(
        nn.Linear(3, 64), nn.LayerNorm(64), nn.ReLU(),
        nn.Linear(64, 64), nn.LayerNorm(64), nn.ReLU(),
        nn.Linear(64, NUM_PARTS),
    )


def run(fixed=False, monitor=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    xyz, raw_ids, _ = make_clouds(256, rng)
    test_xyz, _, test_parts = make_clouds(64, rng)
    labels = labels_from_raw(raw_ids, fixed)
    model = build_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    criterion = nn.CrossEntropyLoss()

    mon = gradhunt.Monitor(model, optimizer=opt) if monitor else None
    report = None
    try:
        gen = torch.Generator().manual_seed(0)
        for step in range(200):
            idx = torch.randint(0, len(xyz), (16,), generator=gen)

            def closure():
                opt.zero_grad()
                logits = model(xyz[idx])
                loss = criterion(logits.reshape(-1, NUM_PARTS), labels[idx].reshape(-1))
                loss.backward()
                return loss

            loss = opt.step(closure)
            if mon is not None:
                mon.step(loss)
        if mon is not None:
            report = mon.report()
    finally:
        if mon is not None:
            mon.close()

    with torch.no_grad():
        pred = model(test_xyz).argmax(-1)
    metric = (pred == test_parts).float().mean().item()
    return {"report": report, "metric": metric, "higher_is_better": True}
