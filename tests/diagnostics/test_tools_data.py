"""validate_data: a clean data set is silent; planted NaNs, leaks, imbalance and scale are found
with counts and example indices; duplicate search agrees with brute force."""
import json

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import minigrad
from diagnostics import validate_data
from diagnostics.errors import DiagnosticsError
from diagnostics.tools import data_validation


def _clean(rows=400, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 6)).astype(np.float32)
    y = rng.integers(0, 4, rows)
    return x, y


@pytest.mark.parametrize("wrap", [np.asarray, torch.from_numpy, minigrad.tensor])
def test_clean_data_gives_no_finding_at_all(wrap):
    x, y = _clean()
    tx, ty = _clean(rows=100, seed=1)
    report = validate_data(wrap(x), wrap(y), test_x=wrap(tx), test_y=wrap(ty))
    assert report.passed and report.findings == []
    classes, counts = np.unique(y, return_counts=True)
    assert report.counts == {"train_rows": 400, "test_rows": 100, "duplicates_train_test": 0,
                             "class_counts": dict(zip(classes.tolist(), counts.tolist()))}
    assert str(report).endswith("no findings")


def test_planted_problems_are_found_with_counts_and_examples():
    x, y = _clean()
    tx, _ = _clean(rows=100, seed=1)
    x[[7, 300], 2] = np.nan
    x[11, 0] = np.inf
    x[:, 4] = x[:, 4] * 40 + 120  # a feature in raw units
    x[:, 5] = 3.0                 # a constant feature
    tx[[5, 60]] = x[[20, 21]]
    y[:] = 0
    y[:15] = 1                    # 385:15
    report = validate_data(x, y, test_x=tx)
    by_code = {(f.code, f.severity): f for f in report.findings}
    assert not report.passed
    nonfinite = by_code["DATA_NONFINITE", "error"]
    assert nonfinite.evidence["nan"] == 2 and nonfinite.evidence["inf"] == 1
    assert list(nonfinite.evidence["example_rows"]) == [7, 11, 300]
    leak = by_code["DATA_LEAKAGE", "warning"]
    assert list(leak.evidence["example_test_rows"]) == [5, 60]
    assert list(leak.evidence["example_train_rows"]) == [20, 21]
    assert report.counts["duplicates_train_test"] == 2
    imbalance = by_code["LABEL_IMBALANCE", "warning"]
    assert imbalance.evidence["ratio"] == pytest.approx(385 / 15)
    assert "class 0 has 385 examples, class 1 only 15" in imbalance.message
    scale = by_code["UNNORMALIZED_INPUT", "warning"]
    assert list(scale.evidence["example_features"]) == [4]
    constant = by_code["UNNORMALIZED_INPUT", "info"]
    assert list(constant.evidence["example_features"]) == [5]
    assert json.loads(json.dumps(report.to_dict()))["passed"] is False
    assert "DATA_LEAKAGE" in str(report)


def test_imbalance_up_to_ten_to_one_is_fine_and_one_hot_labels_count():
    x, _ = _clean(rows=110)
    y = np.array([0] * 100 + [1] * 10)
    assert validate_data(x, y).passed
    one_hot = np.eye(2)[np.array([0] * 105 + [1] * 5)]
    report = validate_data(x, one_hot)
    assert [f.code for f in report.findings] == ["LABEL_IMBALANCE"]
    assert report.counts["class_counts"] == {0: 105, 1: 5}


def test_regression_targets_are_not_counted_as_classes():
    x, _ = _clean()
    report = validate_data(x, np.random.default_rng(0).standard_normal(400))
    assert report.passed and "class_counts" not in report.counts


def test_image_batches_are_judged_per_channel():
    pixels = np.random.default_rng(0).integers(0, 256, (20, 3, 4, 4)).astype(np.uint8)
    (finding,) = validate_data(pixels).findings
    assert finding.code == "UNNORMALIZED_INPUT" and "3 of 3 channels" in finding.message
    assert validate_data(pixels / 255.0).passed  # [0, 1] pixels are fine


def test_duplicates_match_across_dtypes_and_signed_zeros():
    train = np.array([[0.0, 1.5], [2.0, -3.0]], dtype=np.float32)
    test = np.array([[-0.0, 1.5], [2.0, -3.0], [9.0, 9.0]], dtype=np.float64)
    assert data_validation._leaked_rows(train, test) == [(0, 0), (1, 1)]


def test_hash_collisions_are_confirmed_row_by_row(monkeypatch):
    monkeypatch.setattr(data_validation, "_row_hashes",
                        lambda raw: np.zeros(len(raw), dtype=np.uint64))  # everything collides
    train = np.arange(12, dtype=np.float64).reshape(6, 2)
    test = np.array([[100.0, 101.0], [4.0, 5.0], [10.0, 11.0]])
    assert data_validation._leaked_rows(train, test) == [(1, 2), (2, 5)]


@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 40), width=st.integers(1, 5))
def test_duplicate_search_agrees_with_brute_force(seed, rows, width):
    rng = np.random.default_rng(seed)
    train = rng.integers(0, 3, (rows, width)).astype(np.int16)  # small range: many repeats
    test = rng.integers(0, 3, (rows // 2 + 1, width)).astype(np.int16)
    found = data_validation._leaked_rows(train, test)
    seen = {row.tobytes(): index for index, row in enumerate(train)}
    expected = {index for index, row in enumerate(test) if row.tobytes() in seen}
    assert {t for t, _ in found} == expected
    assert all(np.array_equal(train[r], test[t]) for t, r in found)


def test_bad_arguments_raise_naming_the_argument():
    x, y = _clean(rows=10)
    cases = [
        ((x.tolist(),), {}, r"train_x: expected a NumPy array, a tensor, or an iterable of "
                            r"\(x, y\) batches \(a DataLoader\), got a list whose item 0"),
        ((np.zeros((0, 3)),), {}, "train_x: expected at least one row"),
        ((np.array(["a", "b"]),), {}, "train_x: expected a numeric or boolean array"),
        ((x, y[:5]), {}, "train_y: expected 10 rows, one per row of train_x"),
        ((x,), {"test_x": np.zeros((4, 5))}, r"test_x: expected rows of shape \(6,\)"),
        ((x,), {"test_y": y}, "test_y: expected to come with test_x"),
        ((x,), {"test_x": x, "test_y": y[:3]}, "test_y: expected 10 rows, one per row of test_x"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(DiagnosticsError, match=message):
            validate_data(*args, **kwargs)


@pytest.mark.parametrize("value", [0.1, 3.0, -1e-3])
def test_a_constant_feature_is_constant_even_when_float_rounding_gives_a_tiny_std(value):
    x = np.column_stack([np.random.default_rng(0).standard_normal(525), np.full(525, value)])
    findings = validate_data(x).findings
    assert [(f.code, f.severity) for f in findings] == [("UNNORMALIZED_INPUT", "info")]
    assert list(findings[0].evidence["example_features"]) == [1]
