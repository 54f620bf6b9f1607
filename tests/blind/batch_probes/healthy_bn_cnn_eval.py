"""Healthy: a Conv-BatchNorm CNN trained a few steps (BatchNorm mixes the batch in train mode,
by design) and handed over in eval mode, where it uses its running statistics: a raw image
tensor input."""
import torch
import torch.nn.functional as F
from torch import nn

from tests.blind.batch_probes._common import seeded


def build(fixed=True):
    torch.manual_seed(0)
    gen = seeded(91)
    x = torch.randn(256, 3, 10, 10, generator=gen) * 2 + 1
    y = (x[:, 0].mean((1, 2)) > 1).long()
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for s in range(0, 256, 32):
        loss = F.cross_entropy(model(x[s:s + 32]), y[s:s + 32])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return dict(model=model, inputs=x[:16].clone(), options={})
