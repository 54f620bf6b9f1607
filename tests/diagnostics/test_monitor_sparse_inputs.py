"""Sparse, nested and integer model inputs (issue 32): a GCN fed a sparse adjacency, a model
fed a dict or a list, token ids. The input is judged where it means something (the node
features beside the adjacency) and skipped quietly otherwise: never a MONITOR_ERROR."""
import warnings

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from diagnostics import Monitor
from diagnostics.integrations.watch import TrainingWatch
from diagnostics.monitor.kernels.torch_kernels import TorchKernels
from diagnostics.monitor.probes.inputs import input_tensor, layer_input
from tests.realistic.examples import gcn

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")


class _Backend:
    torch = torch

    @staticmethod
    def is_tensor(value):
        return isinstance(value, torch.Tensor)


def _graph(layout):
    x, adjacency, labels = gcn.planted_graph(torch.Generator().manual_seed(0))
    return x, adjacency.to_sparse_csr() if layout == "csr" else adjacency, labels


class Batched(gcn.GCN):
    """The same network, fed its graph as one dict or one list."""

    def forward(self, batch):
        if isinstance(batch, dict):
            return super().forward(batch["adj"], batch["x"])
        return super().forward(batch[1], batch[0])


def _train(model, call, labels, *, steps=25, scale=1.0):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Monitor(model, optimizer, every=1) as monitor:
            for _ in range(steps):
                model.train()
                optimizer.zero_grad()
                loss = F.nll_loss(call(scale), labels)
                loss.backward()
                optimizer.step()
                monitor.step(loss)
                model.eval()
                with torch.no_grad():   # an evaluation pass: the eval-randomness replay
                    call(scale)
    return monitor.report()


CALLS = {
    "positional": lambda model, x, adj: lambda s: model(adj, x * s),
    "dict": lambda model, x, adj: lambda s: model({"adj": adj, "x": x * s}),
    "list": lambda model, x, adj: lambda s: model([x * s, adj]),
}


@pytest.mark.parametrize("layout", ["coo", "csr"])
@pytest.mark.parametrize("passed", sorted(CALLS))
def test_a_gcn_fed_a_sparse_adjacency_is_watched_quietly_and_its_features_measured(layout,
                                                                                 passed):
    torch.manual_seed(0)
    x, adjacency, labels = _graph(layout)
    model = gcn.GCN(x.shape[1], 16, 4) if passed == "positional" else Batched(x.shape[1], 16, 4)
    report = _train(model, CALLS[passed](model, x, adjacency), labels)
    assert report.findings == [], [str(f) for f in report.findings]
    means = report.history.column("input/mean")
    assert len(means) == 25
    assert means[-1] == pytest.approx(float(x.mean()), rel=1e-4)


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_unscaled_node_features_beside_a_sparse_adjacency_are_named(layout):
    torch.manual_seed(0)
    x, adjacency, labels = _graph(layout)
    model = gcn.GCN(x.shape[1], 16, 4)
    report = _train(model, CALLS["positional"](model, x, adjacency), labels, scale=300.0)
    codes = [f.code for f in report.findings]
    assert "UNNORMALIZED_INPUT" in codes and "MONITOR_ERROR" not in codes, codes


def test_nan_in_the_node_features_is_named():
    torch.manual_seed(0)
    x, adjacency, labels = _graph("coo")
    x[3, 2] = float("nan")
    model = gcn.GCN(x.shape[1], 16, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        with Monitor(model, optimizer, every=1) as monitor:
            for _ in range(3):
                optimizer.zero_grad()
                loss = F.nll_loss(model(adjacency, x), labels)
                loss.backward()
                optimizer.step()
                monitor.step(loss)
    codes = [f.code for f in monitor.report().findings]
    assert "DATA_NONFINITE" in codes and "MONITOR_ERROR" not in codes, codes


class SparseOnly(nn.Module):
    """A layer fed nothing but a sparse tensor (bag-of-words counts): no statistics."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(50, 3) * 0.1)

    def forward(self, counts):
        return torch.sparse.mm(counts, self.weight)


def test_a_sparse_only_input_is_skipped_quietly():
    torch.manual_seed(0)
    model = SparseOnly()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(model, optimizer, every=1) as monitor:
        for _ in range(10):
            counts = (torch.rand(16, 50) < 0.1).float().mul(7.0).to_sparse()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(counts), torch.randint(0, 3, (16,)))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    report = monitor.report()
    assert report.findings == [], [str(f) for f in report.findings]
    assert not any(report.history.column("input/mean") == report.history.column("input/mean"))


class TokenModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.head = nn.Linear(16, 100)

    def forward(self, batch):
        return self.head(self.embed(batch["input_ids"]))


def test_token_ids_in_a_dict_give_no_statistics_and_no_error():
    torch.manual_seed(0)
    model = TokenModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    with Monitor(model, optimizer, every=1) as monitor:
        for _ in range(10):
            ids = torch.randint(0, 100, (8, 12))
            optimizer.zero_grad()
            logits = model({"input_ids": ids, "attention_mask": torch.ones(8, 12)})
            loss = F.cross_entropy(logits.flatten(0, 1), ids.roll(-1, 1).flatten())
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    report = monitor.report()
    assert "MONITOR_ERROR" not in [f.code for f in report.findings]


def test_the_input_inside_a_batch_and_beside_a_sparse_tensor():
    backend = _Backend()
    x, ids = torch.randn(4, 3), torch.arange(4)
    adj = torch.eye(4).to_sparse()
    assert input_tensor(backend, (adj, x), {}) is x
    assert input_tensor(backend, ({"adj": adj, "x": x},), {}) is x
    assert input_tensor(backend, ([ids, x],), {}) is ids          # the first, as positionally
    assert input_tensor(backend, (), {"batch": {"feats": x, "graph": adj}}) is x
    assert input_tensor(backend, (adj,), {}) is adj                # the batch size still
    assert layer_input(backend, (adj, x)) is x
    assert layer_input(backend, (adj, ids)) is None
    assert layer_input(backend, (ids, x)) is ids                   # today's rule: ids first


def test_kernels_give_no_statistics_for_a_sparse_tensor():
    kernels = TorchKernels(_Backend())
    for sparse in (torch.eye(5).to_sparse(), torch.eye(5).to_sparse_csr()):
        assert kernels.input_statistics(sparse) is None
        assert kernels.activation_statistics(sparse) is None
        assert kernels.value_sample(sparse, limit=8) is None
        assert kernels.prediction_entropy(sparse) is None


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_the_gcn_program_under_training_watch_is_watched_and_quiet(layout):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        heard = []
        with TrainingWatch(on_finding=lambda label, f: heard.append(f)) as watch:
            metrics = gcn.main(epochs=60, layout=layout)
    assert [label for label, _ in watch.watched] == ["model (GCN, Adam)"]
    assert not watch.problems and heard == [], [str(f) for f in heard]
    assert metrics["test_after"] > 0.75
