"""A sparse embedding gradient (``nn.Embedding(sparse=True)``, trained by SparseAdam beside a
dense optimizer): the Monitor measures it from its stored rows and stays on."""
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from diagnostics import Monitor


class Recommender(nn.Module):
    def __init__(self):
        super().__init__()
        self.items = nn.Embedding(1000, 8, sparse=True)
        self.head = nn.Linear(8, 1)

    def forward(self, ids):
        return self.head(self.items(ids).mean(1)).squeeze(1)


@pytest.mark.parametrize("watched", ["sparse", "dense"])
def test_a_sparse_gradient_is_measured_and_nothing_is_turned_off(watched):
    torch.manual_seed(0)
    model = Recommender()
    sparse = torch.optim.SparseAdam(list(model.items.parameters()), lr=1e-2)
    dense = torch.optim.AdamW(model.head.parameters(), lr=1e-2)
    with Monitor(model, sparse if watched == "sparse" else dense, every=1) as monitor:
        for _ in range(30):
            ids, target = torch.randint(0, 1000, (32, 5)), torch.randn(32)
            sparse.zero_grad()
            dense.zero_grad()
            loss = ((model(ids) - target) ** 2).mean()
            loss.backward()
            sparse.step()
            dense.step()
            monitor.step(loss)
    report = monitor.report()
    assert [f.code for f in report.findings] == [], [str(f) for f in report.findings]


def test_sparse_gradient_statistics_match_the_dense_ones():
    from diagnostics.monitor.kernels.torch_kernels import TorchKernels

    kernels = TorchKernels(SimpleNamespace(torch=torch))
    dense = torch.zeros(6, 3)
    dense[1], dense[4] = torch.tensor([1.0, -2.0, 0.5]), torch.tensor([-3.0, 0.0, 1.0])
    sparse = dense.to_sparse()
    for per_unit in (False, True):
        got = kernels.gradient_statistics(sparse, per_unit=per_unit)
        want = kernels.gradient_statistics(dense.clone(), per_unit=per_unit)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
    torch.testing.assert_close(kernels.gradient_norms([sparse]), kernels.gradient_norms([dense]))
