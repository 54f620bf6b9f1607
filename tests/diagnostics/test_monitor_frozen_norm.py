"""FROZEN_BATCHNORM_DRIFTS: a frozen part's batch norms left in train mode keep folding every
batch into their running statistics; kept in eval mode, or trainable, they are not reported."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from diagnostics import Monitor


def _run(*, freeze=True, keep_eval=False, steps=120):
    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU())
    head = nn.Linear(16, 2)
    model = nn.Sequential(backbone, head)
    if freeze:
        backbone.requires_grad_(False)
    optimizer = torch.optim.Adam((head if freeze else model).parameters(), lr=1e-2)
    with Monitor(model, optimizer) as monitor:        # default sampling
        for _ in range(steps):
            model.train()
            if keep_eval:
                backbone.eval()
            x = 3 * torch.randn(16, 8) + 1
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), (x[:, 0] > 1).long())
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    return monitor.report()


def test_frozen_batchnorm_in_train_mode_is_named_with_the_fix():
    finding = next(f for f in _run().findings if f.code == "FROZEN_BATCHNORM_DRIFTS")
    assert finding.location == "0.1" and finding.severity == "warning"
    assert "keep updating their running mean and variance" in finding.message
    assert ".eval()" in finding.suggestion


@pytest.mark.parametrize("options", [{"keep_eval": True}, {"freeze": False}])
def test_frozen_norms_in_eval_mode_or_trainable_ones_are_quiet(options):
    assert "FROZEN_BATCHNORM_DRIFTS" not in {f.code for f in _run(**options).findings}
