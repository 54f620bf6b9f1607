"""Near-duplicate DATA_LEAKAGE is judged against the share of close pairs that the data's own
intrinsic dimension makes likely: a densely sampled table of two underlying factors, split at
random, stays quiet; jittered copies of training rows in a high-dimensional set are named."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
from torch.utils.data import TensorDataset  # noqa: E402

from diagnostics import validate_data  # noqa: E402
from diagnostics.tools.pipeline.near_duplicates import distinct_scale_and_dimension  # noqa: E402


def _near(report):
    return [f for f in report if f.code == "DATA_LEAKAGE" and f.is_alarm
            and "near-duplicate" in f.message]


def _split(x, y, seed=0):
    order = np.random.default_rng(seed).permutation(len(x))
    cut = int(0.8 * len(x))
    as_set = lambda rows: TensorDataset(torch.as_tensor(x[rows]), torch.as_tensor(y[rows]))  # noqa: E731
    return as_set(order[:cut]), as_set(order[cut:])


def test_a_dense_table_of_two_factors_split_at_random_is_quiet():
    rng = np.random.default_rng(0)
    factors = rng.uniform(-1, 1, size=(1500, 2))
    lift = rng.normal(size=(2, 12))
    x = np.tanh(factors @ lift).astype(np.float32)
    y = (factors[:, 0] > 0).astype(np.int64)
    train, test = _split(x, y)
    assert not _near(validate_data(train, test=test))


def test_jittered_copies_of_training_rows_are_named():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(1200, 12)).astype(np.float32)
    y = rng.integers(0, 3, 1200)
    train = TensorDataset(torch.as_tensor(x), torch.as_tensor(y))
    copies = x[:200] + 0.02 * rng.normal(size=(200, 12)).astype(np.float32)
    test = TensorDataset(torch.as_tensor(copies), torch.as_tensor(y[:200]))
    found = _near(validate_data(train, test=test))
    assert found and found[0].evidence["near_duplicates"] >= 150


@settings(max_examples=6, deadline=None)
@given(dimension=st.sampled_from([1, 2, 4, 8]), seed=st.integers(0, 1000))
def test_the_intrinsic_dimension_estimate_follows_the_data(dimension, seed):
    rng = np.random.default_rng(seed)
    latent = rng.uniform(size=(1200, dimension))
    rows = latent @ rng.normal(size=(dimension, 16))       # embedded in 16 values
    _, estimate = distinct_scale_and_dimension(rows)
    assert dimension / 1.6 <= estimate <= dimension * 1.6
