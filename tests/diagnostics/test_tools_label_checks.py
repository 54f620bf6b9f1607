"""Label checks: LABEL_RANGE for targets that do not fit the output, LABELS_SORTED for batches
sorted by class; quiet on healthy labels."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from diagnostics import DiagnosticsError, validate_data
from diagnostics.tools.label_checks import check_batch_label_order, check_label_range


def test_labels_one_to_c_with_c_outputs_use_a_class_the_output_lacks():
    y = np.arange(200) % 10 + 1
    [finding] = check_label_range(y, num_classes=10)
    assert finding.code == "LABEL_RANGE" and finding.severity == "error"
    assert "subtract 1" in finding.message and finding.evidence["outside"] == 20


def test_labels_one_to_c_with_c_plus_one_outputs_leave_unit_zero_unused():
    y = np.arange(220) % 10 + 1
    [finding] = check_label_range(y, num_classes=11)
    assert finding.severity == "warning" and finding.evidence["unused_units"] == [0]
    assert "labels start at 1" in finding.message


def test_healthy_labels_and_small_samples_are_quiet():
    assert check_label_range(np.arange(200) % 10, num_classes=10) == []
    assert check_label_range(np.array([1, 2, 3, 1, 2]), num_classes=4) == []   # too few rows
    assert check_label_range(np.linspace(0, 1, 50), num_classes=4) == []       # regression
    assert check_label_range(np.eye(4)[np.arange(40) % 4], num_classes=4) == []  # one-hot


def test_label_range_arguments():
    with pytest.raises(DiagnosticsError, match="num_classes"):
        check_label_range(np.arange(10), num_classes=1)
    with pytest.raises(DiagnosticsError, match="targets"):
        check_label_range("labels", num_classes=3)


def test_validate_data_checks_labels_against_num_classes():
    x = np.random.default_rng(0).standard_normal((200, 3))
    y = np.arange(200) % 4
    assert validate_data(x, y, num_classes=4).passed
    report = validate_data(x, y + 1, num_classes=5)
    assert [f.code for f in report.findings] == ["LABEL_RANGE"]
    with pytest.raises(DiagnosticsError, match="num_classes"):
        validate_data(x, num_classes=4)


def test_sorted_batches_are_flagged():
    y = np.repeat(np.arange(4), 32)
    [finding] = check_batch_label_order([y[i:i + 16] for i in range(0, 128, 16)])
    assert finding.code == "LABELS_SORTED" and finding.evidence["single_class_batches"] == 8


def test_a_loaders_input_label_pairs_are_read_for_their_labels():
    """``check_batch_label_order(list(loader))``: the batches as a DataLoader yields them."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    y = torch.repeat_interleave(torch.arange(4), 32)
    loader = DataLoader(TensorDataset(torch.randn(128, 3), y), batch_size=16, shuffle=False)
    [finding] = check_batch_label_order(list(loader))
    assert finding.code == "LABELS_SORTED"
    shuffled = DataLoader(TensorDataset(torch.randn(128, 3), y), batch_size=16, shuffle=True,
                          generator=torch.Generator().manual_seed(0))
    assert check_batch_label_order(list(shuffled)) == []


def test_monotone_batches_spanning_class_borders_are_flagged():
    y = np.repeat(np.arange(10), 20)
    batches = [y[i:i + 32] for i in range(0, 192, 32)]
    [finding] = check_batch_label_order(batches)
    assert finding.evidence["monotone"]


def test_quiet_on_few_batches_regression_and_imbalanced_binary_labels():
    assert check_batch_label_order([np.array([0, 0, 0])]) == []
    assert check_batch_label_order([np.array([0.5, 1.5]), np.array([2.5, 0.1])]) == []
    rng = np.random.default_rng(1)
    imbalanced = (rng.random(256) < 0.03).astype(int)
    assert check_batch_label_order([imbalanced[i:i + 32] for i in range(0, 256, 32)]) == []


@given(seed=st.integers(0, 2 ** 32 - 1), classes=st.integers(2, 12),
       size=st.integers(8, 64), count=st.integers(2, 10))
def test_shuffled_balanced_batches_are_never_flagged(seed, classes, size, count):
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(size * count) % classes)
    assert check_batch_label_order([y[i * size:(i + 1) * size] for i in range(count)]) == []


@given(classes=st.integers(2, 12), per_class=st.integers(16, 64), size=st.integers(4, 16))
def test_class_sorted_batches_are_always_flagged(classes, per_class, size):
    """A pass over the data in stored order; the first batches alone may all be one class,
    and then nothing can be judged (a single class seen is not reported)."""
    y = np.repeat(np.arange(classes), per_class)
    batches = [y[i:i + size] for i in range(0, len(y) - size + 1, size)]
    assert [f.code for f in check_batch_label_order(batches)] == ["LABELS_SORTED"]


def test_torch_tensors_are_accepted():
    torch = pytest.importorskip("torch")
    y = torch.arange(120) % 6
    assert check_label_range(y, num_classes=6) == []
    assert check_batch_label_order([torch.zeros(8, dtype=torch.long),
                                    torch.ones(8, dtype=torch.long),
                                    torch.full((8,), 2)]) != []
