"""Samplers that, as configured, cannot reach some examples: a weighted sampler given fewer
weights than the data set has examples (one per class), a DistributedSampler split among more
replicas than the process group has ranks. The same samplers configured as meant stay quiet."""
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import (DataLoader, DistributedSampler, TensorDataset,  # noqa: E402
                              WeightedRandomSampler)

from diagnostics import validate_data  # noqa: E402


def _data(n=400):
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 4, (n,), generator=generator)
    return TensorDataset(torch.randn(n, 8, generator=generator), labels), labels


def _rows(report):
    return [f for f in report if f.code == "PIPELINE_ROWS_MISSING" and f.is_alarm]


def test_a_weight_per_class_where_one_per_example_was_meant_is_named():
    data, labels = _data()
    per_class = torch.tensor([1.0, 2.0, 4.0, 8.0])
    short = DataLoader(data, batch_size=32,
                       sampler=WeightedRandomSampler(per_class, num_samples=len(data)))
    found = _rows(validate_data(short))
    assert found and "holds 4 weights for a data set of 400 examples" in found[0].message
    meant = DataLoader(data, batch_size=32,
                       sampler=WeightedRandomSampler(per_class[labels], num_samples=len(data)))
    assert not _rows(validate_data(meant))


def test_a_distributed_sampler_without_its_ranks_is_named():
    data, _ = _data()
    alone = DataLoader(data, batch_size=32,
                       sampler=DistributedSampler(data, num_replicas=4, rank=0))
    found = _rows(validate_data(alone))
    assert found and "num_replicas=4" in found[0].message and "1 rank" in found[0].message
    single = DataLoader(data, batch_size=32,
                        sampler=DistributedSampler(data, num_replicas=1, rank=0))
    assert not _rows(validate_data(single))


def test_a_table_balanced_by_its_weighted_sampler_is_not_called_imbalanced():
    generator = torch.Generator().manual_seed(1)
    labels = torch.cat([torch.zeros(380, dtype=torch.long), torch.ones(20, dtype=torch.long)])
    data = TensorDataset(torch.randn(400, 8, generator=generator), labels)
    inverse = 1.0 / torch.bincount(labels).double()

    def imbalance(loader):
        return [f for f in validate_data(loader) if f.code == "LABEL_IMBALANCE"]
    balanced = DataLoader(data, batch_size=32,
                          sampler=WeightedRandomSampler(inverse[labels], num_samples=400))
    assert not imbalance(balanced)
    assert imbalance(DataLoader(data, batch_size=32, shuffle=True))
