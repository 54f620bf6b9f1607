"""validate_data on arrays compares the train and test distributions with the pipeline's rule
(TRANSFORM_SHIFT): a test split left unstandardised is named per feature/channel; a random
split of one data set and small natural shifts stay quiet."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics import validate_data


def _credit(rows, seed):
    """Tabular features on very different raw scales (amounts, ages, ratios)."""
    rng = np.random.default_rng(seed)
    scale = np.array([1000.0, 50.0, 1.0, 20000.0, 3.0, 0.01])
    offset = np.array([5000.0, 40.0, 0.0, 60000.0, 10.0, 0.05])
    raw = rng.standard_normal((rows, 6)) * scale + offset
    return raw, (raw[:, 0] > 5000).astype(np.int64)


def _shifts(report):
    return [f for f in report if f.code == "TRANSFORM_SHIFT"]


@pytest.mark.parametrize("wrap", [np.asarray, torch.from_numpy])
def test_a_test_split_never_standardised_is_named_per_feature(wrap):
    raw, y = _credit(3000, 0)
    mu, sd = raw[:2400].mean(0), raw[:2400].std(0)
    train_x = ((raw[:2400] - mu) / sd).astype(np.float32)
    test_x = raw[2400:].astype(np.float32)          # the bug: raw features at test time
    report = validate_data(wrap(train_x), wrap(y[:2400]), test_x=wrap(test_x),
                           test_y=wrap(y[2400:]))
    assert not report.passed
    (finding,) = _shifts(report)
    assert finding.severity == "warning"
    assert "test split looks unnormalised in features" in finding.message
    assert "after their transforms" not in finding.message   # arrays: no transforms involved
    named = set(finding.evidence["example_channels"].tolist())
    assert named == {0, 1, 3, 4, 5}                  # feature 2 is N(0, 1) raw: not named
    fixed = validate_data(wrap(train_x), wrap(y[:2400]),
                          test_x=wrap(((raw[2400:] - mu) / sd).astype(np.float32)),
                          test_y=wrap(y[2400:]))
    assert fixed.passed and not _shifts(fixed)


def test_a_test_split_scaled_differently_is_named():
    rng = np.random.default_rng(3)
    images = rng.uniform(0, 1, (600, 3, 8, 8)).astype(np.float32)
    test = images[500:].copy()
    test[:, 1] *= 4.0                                  # one channel scaled on the test side
    report = validate_data(images[:500], test_x=test)
    (finding,) = _shifts(report)
    assert "channel 1" in finding.message and "scaled differently" in finding.message
    assert "unnormalised" not in finding.message


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), test_size=st.integers(30, 600),
       standardise=st.booleans())
def test_a_random_split_of_one_data_set_is_quiet(seed, test_size, standardise):
    rng = np.random.default_rng(seed)
    raw = rng.gamma(2.0, 1.5, size=(1800, 6)) * rng.uniform(0.1, 1e4, 6)
    raw = raw[rng.permutation(len(raw))]
    if standardise:
        raw = (raw - raw[:1200].mean(0)) / raw[:1200].std(0)
    report = validate_data(raw[:1200], test_x=raw[1200:1200 + test_size])
    assert not _shifts(report)


@pytest.mark.parametrize("move, widen", [(0.2, 1.0), (0.0, 1.2), (0.3, 1.25)])
def test_small_natural_shifts_are_quiet(move, widen):
    """A later period or another site: the test distribution a few tenths of a spread away."""
    rng = np.random.default_rng(1)
    train = rng.standard_normal((3000, 8))
    test = rng.standard_normal((1000, 8)) * widen + move
    assert not _shifts(validate_data(train, test_x=test))


def test_a_rarely_non_zero_feature_without_spread_in_a_small_test_split_is_quiet():
    """Sparse pixels, rare flags: a random test split may hold none of the few non-zero rows;
    no spread there is sampling chance, not a transform."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((700, 4))
    x[:, 3] = 0.0
    x[rng.choice(700, 6, replace=False)[:6], 3] = 16.0      # 6 of 700 rows
    order = np.argsort(x[:, 3] > 0, kind="stable")           # the test split holds none
    x = x[order[::-1]]
    assert (x[525:, 3] == 0).all() and (x[:525, 3] > 0).sum() == 6
    assert not _shifts(validate_data(x[:525], test_x=x[525:]))
    x[525:, 3] = 0.0
    x[:525, 3] = rng.standard_normal(525)                    # the train split varies widely
    (finding,) = _shifts(validate_data(x[:525], test_x=x[525:]))
    assert "feature 3" in finding.message


def _pixel_levels(rows, seed):
    """Digit-like pixels: integer levels 0..16, each pixel zero in its own share of rows."""
    rng = np.random.default_rng(seed)
    zero_share = rng.uniform(0.3, 0.9, 24)
    levels = rng.integers(1, 17, (rows, 24)).astype(np.float64)
    levels[rng.random((rows, 24)) < zero_share] = 0.0
    return levels


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), test_size=st.integers(100, 600))
def test_a_random_split_of_discrete_pixel_levels_is_quiet(seed, test_size):
    """The share of zeros moves by chance between splits; a quantile of tied levels jumps a
    whole level with it, which is no transform."""
    raw = _pixel_levels(1800, seed)
    mu, sd = raw[:1200].mean(0), raw[:1200].std(0)
    train, test = (raw[:1200] - mu) / sd, (raw[1200:1200 + test_size] - mu) / sd
    assert not _shifts(validate_data(train, test_x=test))


def test_discrete_pixel_levels_left_unstandardised_on_the_test_side_are_named():
    raw = _pixel_levels(1800, 7)
    mu, sd = raw[:1200].mean(0), raw[:1200].std(0)
    (finding,) = _shifts(validate_data((raw[:1200] - mu) / sd, test_x=raw[1200:]))
    # the sparsest pixels' spread is too noisy to judge alone; most are named
    assert finding.evidence["channels"] > 12 and "scaled differently" in finding.message


def test_a_column_constant_in_the_test_split_up_to_rounding_counts_as_constant():
    """A pixel never lit in the test split, standardised with the training mean, holds one
    value plus rounding; its spread there is none, judged by how rarely it is lit."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1650, 3))
    lit = np.zeros(1650)
    lit[rng.choice(1200, 5, replace=False)] = 16.0           # 5 of 1200 training rows
    x = np.column_stack([x, (lit - lit[:1200].mean()) / lit[:1200].std()])
    x[1200:, 3] += rng.normal(0, 1e-15, 450)                 # rounding, not spread
    assert not _shifts(validate_data(x[:1200], test_x=x[1200:]))
