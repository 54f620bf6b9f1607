"""validate_data over a pipeline (a Dataset or DataLoader read through its transforms).

Healthy pipelines (shuffled loaders, train-only augmentation, joint transforms, splits of one
distribution, sliding windows, subsets) stay quiet; rows lost or repeated in one pass, a
normalisation on one split, a transform applied to the input and not its mask, augmented
copies on both sides of a split and a loader sorted by label are named, with counts; user code
that raises is a finding; no random state of the user's moves.
"""
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import (DataLoader, Dataset, IterableDataset, Sampler, Subset,
                              TensorDataset)

from diagnostics import validate_data
from diagnostics.errors import DiagnosticsError
from diagnostics.tools.pipeline.read import REPEATS


def _images(n, seed=0, channels=3, side=16):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, channels, side, side, generator=g)
    x = torch.nn.functional.avg_pool2d(x, 3, 1, 1) * 3 * 0.25
    base = torch.tensor([0.5, 0.4, 0.3, 0.6])[:channels].view(1, channels, 1, 1)
    return (x + base).clamp(0, 1), torch.randint(0, 5, (n,), generator=g)


class Images(Dataset):
    """Images normalised with fixed constants; ``augment``: pad-crop, flip, brightness."""

    def __init__(self, x, y, *, augment=False, normalise=True, scale=1.0, half=False):
        self.x, self.y = x, y
        self.augment, self.normalise, self.scale, self.half = augment, normalise, scale, half

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        j = i // 2 if self.half else i
        x = self.x[j]
        if self.augment:
            x = torch.nn.functional.pad(x, (2, 2, 2, 2))
            top, left = torch.randint(0, 5, (2,)).tolist()
            x = x[:, top:top + 16, left:left + 16]
            if torch.rand(()) < 0.5:
                x = x.flip(-1)
            x = x * (0.8 + 0.4 * torch.rand(()))
        x = x * self.scale
        if self.normalise:
            x = (x - 0.4) / 0.25
        return x, int(self.y[j])


def _alarms(report):
    return [f for f in report if f.is_alarm]


def _codes(report):
    return {f.code for f in _alarms(report)}


def test_a_healthy_pipeline_is_quiet_and_the_report_iterates():
    x, y = _images(900)
    train = DataLoader(Images(x[:700], y[:700], augment=True), batch_size=32, shuffle=True,
                       drop_last=True)
    report = validate_data(train, test=Images(x[700:], y[700:]))
    assert _alarms(report) == [] and report.passed
    assert list(report) == report.findings and len(report) == len(report.findings)
    assert report.counts["train_examples"] == 700 and report.counts["test_examples_read"] == 200


# ------------------------------------------------------------------ rows
class DropLast(Sampler):
    def __init__(self, order, dropped):
        self.order, self.dropped = order, dropped

    def __iter__(self):
        return iter(self.order[:len(self.order) - self.dropped])

    def __len__(self):
        return len(self.order) - self.dropped


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(20, 300), dropped=st.integers(0, 15))
def test_a_permutation_sampler_is_quiet_and_one_that_drops_k_indices_is_counted(seed, n,
                                                                                  dropped):
    data = TensorDataset(torch.arange(n, dtype=torch.float32).view(n, 1).repeat(1, 8),
                         torch.zeros(n))
    order = np.random.default_rng(seed).permutation(n).tolist()
    report = validate_data(DataLoader(data, batch_size=8, sampler=DropLast(order, dropped)))
    rows = [f for f in _alarms(report) if f.code == "PIPELINE_ROWS_MISSING"]
    if dropped == 0:
        assert rows == []
    else:
        (finding,) = rows
        assert finding.evidence["missing"] == dropped
        assert f"one pass yields {n - dropped} distinct of the source's {n}" in finding.message


def test_a_sampler_that_repeats_indices_is_counted_and_replacement_samplers_are_not():
    n = 100
    data = TensorDataset(torch.randn(n, 8), torch.zeros(n))
    repeated = list(range(90)) + list(range(10))
    (finding,) = _alarms(validate_data(DataLoader(data, sampler=repeated, batch_size=10)))
    assert finding.evidence["duplicates"] == 10 and finding.evidence["missing"] == 10
    weighted = torch.utils.data.WeightedRandomSampler(torch.ones(n), n)
    assert _alarms(validate_data(DataLoader(data, sampler=weighted, batch_size=10))) == []


def test_idx_floor_half_in_getitem_is_caught_with_the_distinct_count():
    x, y = _images(400)
    (finding,) = _alarms(validate_data(Images(x, y, half=True)))
    assert finding.code == "PIPELINE_ROWS_MISSING"
    assert "one pass yields 200 distinct of the source's 400 examples" in finding.message


def test_identical_examples_up_to_augmentation_noise_are_caught():
    x, y = _images(400)

    class Noisy(Images):
        def __getitem__(self, i):
            image, label = super().__getitem__(i)
            return image + 0.01 * torch.randn(image.shape), label

    (finding,) = _alarms(validate_data(Noisy(x, y, half=True)))
    assert finding.code == "PIPELINE_ROWS_MISSING" and "augmentation noise" in finding.message
    assert _alarms(validate_data(Noisy(x, y))) == []


class Table(Dataset):
    def __init__(self, n=500, short=0):
        rng = np.random.default_rng(0)
        self.x, self.y = rng.standard_normal((n, 10)).astype(np.float32), rng.random(n)
        self.short = short

    def __len__(self):
        return len(self.x) - self.short

    def __getitem__(self, i):
        return torch.from_numpy(self.x[i]), float(self.y[i])


def test_a_len_shorter_than_the_storage_it_reads_is_caught():
    (finding,) = _alarms(validate_data(Table(short=3)))
    assert finding.code == "PIPELINE_ROWS_MISSING" and finding.evidence["missing"] == 3
    assert "one pass yields 497 distinct of the source's 500 examples" in finding.message
    assert _alarms(validate_data(Table())) == []


def test_subsets_sliding_windows_and_range_splits_are_not_lost_rows():
    tokens = torch.randint(0, 100, (3000,), generator=torch.Generator().manual_seed(0))

    class Windows(Dataset):
        def __init__(self, data, block=32):
            self.data, self.block = data, block

        def __len__(self):
            return len(self.data) - self.block

        def __getitem__(self, i):
            return self.data[i:i + self.block], self.data[i + 1:i + self.block + 1]

    assert _alarms(validate_data(Windows(tokens[:2500]), test=Windows(tokens[2500:]))) == []
    table = Table()
    assert _alarms(validate_data(Subset(table, list(range(0, 400))),
                                 test=Subset(table, list(range(400, 500))))) == []


def test_an_iterable_dataset_whose_pass_ends_early_is_caught():
    class Stream(IterableDataset):
        def __init__(self, stop):
            self.x, self.stop = torch.randn(300, 6), stop

        def __len__(self):
            return len(self.x)

        def __iter__(self):
            return iter([(row, 0) for row in self.x[:self.stop]])

    (finding,) = _alarms(validate_data(DataLoader(Stream(120), batch_size=10)))
    assert "one pass yields 120 distinct of the source's 300 examples" in finding.message
    assert _alarms(validate_data(DataLoader(Stream(300), batch_size=10))) == []


def test_an_exception_in_the_users_dataset_or_collate_is_a_finding():
    class Broken(Table):
        def __len__(self):
            return len(self.x) + 5

    (finding,) = [f for f in validate_data(Broken()) if f.severity == "error"]
    assert finding.code == "PIPELINE_ROWS_MISSING" and "IndexError" in finding.message

    def collate(items):
        raise RuntimeError("bad collate")

    report = validate_data(DataLoader(Table(), batch_size=8, collate_fn=collate))
    assert any("bad collate" in f.message for f in report)


# ----------------------------------------------------------------- shift
@pytest.mark.parametrize("kind", ["no_normalise", "scale_255", "channels_swapped"])
def test_a_transform_applied_differently_to_test_is_named_per_channel(kind):
    x, y = _images(900)
    train = Images(x[:700], y[:700], augment=True)
    if kind == "no_normalise":
        test = Images(x[700:], y[700:], normalise=False)
    elif kind == "scale_255":
        test = Images(x[700:] * 255, y[700:], normalise=False, scale=1 / 1)
        train = Images(x[:700] * 255, y[:700], normalise=False, scale=1 / 255)
    else:
        test = Images(x[700:].flip(1), y[700:])
    (finding,) = _alarms(validate_data(train, test=test))
    assert finding.code == "TRANSFORM_SHIFT" and "channel" in finding.message
    if kind == "scale_255":
        assert "255" in finding.message
    if kind == "channels_swapped":
        assert "swapped" in finding.message


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), test_size=st.integers(30, 400))
def test_two_splits_of_one_distribution_never_shift(seed, test_size):
    rng = np.random.default_rng(seed)
    features = rng.gamma(2.0, 1.5, size=(1200, 6)) * rng.uniform(0.1, 10, 6)
    mean, std = features[:800].mean(0), features[:800].std(0)
    scaled = torch.tensor((features - mean) / std, dtype=torch.float32)
    labels = torch.zeros(1200)
    report = validate_data(TensorDataset(scaled[:800], labels[:800]),
                           test=TensorDataset(scaled[800:800 + test_size],
                                              labels[800:800 + test_size]))
    assert "TRANSFORM_SHIFT" not in _codes(report)


# -------------------------------------------------------------- one-sided
class Segmentation(Dataset):
    def __init__(self, joint, n=200):
        g = torch.Generator().manual_seed(0)
        raw = torch.nn.functional.avg_pool2d(torch.randn(n, 1, 24, 24, generator=g), 5, 1, 2)
        self.x, self.mask, self.joint = raw, (raw[:, 0] > 0.05).long(), joint

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x, mask = self.x[i], self.mask[i]
        if torch.rand(()) < 0.5:
            x = x.flip(-1)
            mask = mask.flip(-1) if self.joint else mask
        shift = torch.randint(-3, 4, (2,)).tolist()
        x = torch.roll(x, shift, (-2, -1))
        mask = torch.roll(mask, shift, (-2, -1)) if self.joint else mask
        return x * (0.9 + 0.2 * torch.rand(())), mask


def test_a_flip_of_the_image_and_not_its_mask_is_one_sided_and_a_joint_one_is_not():
    (finding,) = _alarms(validate_data(Segmentation(joint=False)))
    assert finding.code == "TRANSFORM_ONE_SIDED"
    assert finding.evidence["pairs_inconsistent"] >= 2
    assert _alarms(validate_data(Segmentation(joint=True))) == []


def test_per_step_labels_not_shifted_with_their_sequence_are_one_sided():
    tokens = torch.randint(0, 50, (300, 40), generator=torch.Generator().manual_seed(0))

    class Tagged(Dataset):
        def __init__(self, joint):
            self.joint = joint

        def __len__(self):
            return len(tokens)

        def __getitem__(self, i):
            shift = int(torch.randint(0, 6, ()))
            tags = tokens[i] % 3
            return (torch.roll(tokens[i], shift),
                    torch.roll(tags, shift) if self.joint else tags)

    assert "TRANSFORM_ONE_SIDED" in _codes(validate_data(Tagged(False)))
    assert _alarms(validate_data(Tagged(True))) == []


# ----------------------------------------------------------- near-duplicates
def test_augmented_copies_on_both_sides_of_a_split_are_near_duplicates():
    rng = np.random.default_rng(0)
    sources = rng.standard_normal((300, 32)).astype(np.float32)
    copies = np.concatenate([sources + 0.05 * rng.standard_normal(sources.shape)
                             for _ in range(3)]).astype(np.float32)
    source_of = np.tile(np.arange(300), 3)
    order = rng.permutation(len(copies))
    leaky = validate_data(TensorDataset(torch.tensor(copies[order[:720]]), torch.zeros(720)),
                          test=TensorDataset(torch.tensor(copies[order[720:]]), torch.zeros(180)))
    (finding,) = _alarms(leaky)
    assert finding.code == "DATA_LEAKAGE" and "near-duplicate" in finding.message
    in_train = source_of < 240
    clean = validate_data(TensorDataset(torch.tensor(copies[in_train]), torch.zeros(720)),
                          test=TensorDataset(torch.tensor(copies[~in_train]), torch.zeros(180)))
    assert _alarms(clean) == []


# ------------------------------------------------------------ label order
def test_an_unshuffled_loader_over_data_sorted_by_label_or_target_is_caught():
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((1000, 8)), dtype=torch.float32)
    classes = torch.tensor(np.sort(rng.integers(0, 5, 1000)))
    target = torch.tensor(np.sort(rng.standard_normal(1000)), dtype=torch.float32)
    for y in (classes, target):
        sorted_loader = DataLoader(TensorDataset(x, y), batch_size=32)
        assert "LABELS_SORTED" in _codes(validate_data(sorted_loader))
        shuffled = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
        assert _alarms(validate_data(shuffled)) == []
        assert _alarms(validate_data(TensorDataset(x, y))) == []    # a bare Dataset: no order


# ------------------------------------------------------------- contracts
def test_no_random_state_of_the_users_changes():
    x, y = _images(300)
    dataset = Images(x, y, augment=True)
    dataset.rng = np.random.default_rng(5)
    loader = DataLoader(dataset, batch_size=16, shuffle=True,
                        generator=torch.Generator().manual_seed(3))
    torch.manual_seed(11)
    np.random.seed(12)
    random.seed(13)
    before = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate(),
              loader.generator.get_state(), dataset.rng.bit_generator.state)
    validate_data(loader, test=Images(x[:50], y[:50]))
    after = (torch.get_rng_state(), np.random.get_state()[1], random.getstate(),
             loader.generator.get_state(), dataset.rng.bit_generator.state)
    assert torch.equal(before[0], after[0]) and np.array_equal(before[1], after[1])
    assert before[2] == after[2] and torch.equal(before[3], after[3]) and before[4] == after[4]


def test_the_budget_bounds_the_examples_read():
    calls = []

    class Counted(Table):
        def __getitem__(self, i):
            calls.append(i)
            return super().__getitem__(i)

    report = validate_data(Counted(n=5000), budget=300)
    assert len(calls) <= 300 + 2 + REPEATS
    assert report.counts["train_examples"] == 5000
    with pytest.raises(DiagnosticsError, match="budget"):
        validate_data(Counted(), budget=0)


def test_the_older_keyword_and_missing_arguments():
    x = np.random.default_rng(0).standard_normal((50, 4))
    assert validate_data(train_x=x).counts["train_rows"] == 50
    with pytest.raises(DiagnosticsError, match="train"):
        validate_data()
    with pytest.raises(DiagnosticsError, match="test"):
        validate_data(x, test=x, test_x=x)


class Odd(Dataset):
    def __init__(self, kind):
        self.kind = kind

    def __len__(self):
        if self.kind == "len_raises":
            raise TypeError("no length")
        return 40

    def __getitem__(self, i):
        if self.kind == "strings":
            return "a sentence", 1
        if self.kind == "variable":
            return {"input_ids": torch.arange(i % 7 + 3), "labels": torch.tensor(i % 2)}
        if self.kind == "nested":
            return (torch.randn(3), torch.randn(2)), 1
        return torch.randn(4), None


@pytest.mark.parametrize("kind", ["strings", "variable", "nested", "no_target", "len_raises"])
@pytest.mark.parametrize("through_loader", [False, True])
def test_unusual_items_and_collate_functions_never_crash(kind, through_loader):
    data = Odd(kind)
    source = DataLoader(data, batch_size=8, collate_fn=lambda items: items) if (
        through_loader and kind != "len_raises") else data
    report = validate_data(source, test=Odd(kind))
    if kind == "len_raises":
        assert any("no length" in f.message for f in report)
    else:
        assert _alarms(report) == []
