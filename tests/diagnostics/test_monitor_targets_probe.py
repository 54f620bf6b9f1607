"""The targets probe: what it reads at the loss call (the class axis is dim 1 of the loss's
input, rows back from flattened targets, padding runs and ignored positions inside the
content), what it skips (class probabilities as targets, empty batches, float inputs it cannot
read), and that the loss functions are torch's own again after close()."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from diagnostics import Monitor
from diagnostics.monitor.probes import loss_calls
from diagnostics.monitor.probes.targets import (LossTargets, _end_runs, _ignored_interior,
                                                _with_rows)

from .monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
ORIGINALS = {name: getattr(F, name) for name in loss_calls.FUNCTIONS}


def _records(loss_of, *, steps=3, shape=(8, 5)):
    torch.manual_seed(0)
    model = nn.Linear(shape[1], shape[1])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with Monitor(model, optimizer, every=1) as monitor:
        for _ in range(steps):
            x = torch.randn(*shape)
            optimizer.zero_grad()
            loss = loss_of(model(x), x)
            loss.backward()
            optimizer.step()
            monitor.step(loss)
        records = monitor._view().signal(LossTargets).records
    return records, monitor.report()


def test_the_losses_are_torchs_own_after_close():
    model = nn.Linear(4, 3)
    first, second = Monitor(model, every=1), Monitor(model, every=1)
    for monitor in (first, second):
        F.cross_entropy(model(torch.randn(2, 4)), torch.tensor([0, 1])).backward()
        monitor.step(torch.tensor(1.0))
    assert F.cross_entropy is not ORIGINALS["cross_entropy"]
    first.close()
    assert F.nll_loss is not ORIGINALS["nll_loss"]
    second.close()
    assert {name: getattr(F, name) for name in loss_calls.FUNCTIONS} == ORIGINALS
    assert not loss_calls._LISTENERS


def test_class_probabilities_as_targets_are_skipped():
    records, report = _records(lambda out, x: F.cross_entropy(out, torch.softmax(x, 1)))
    assert records == () and not [f for f in report.findings if f.is_alarm]


def test_label_smoothing_keeps_the_class_indices():
    records, _ = _records(lambda out, x: F.cross_entropy(out, x.argmax(1), label_smoothing=0.1))
    assert records and all(r.classes == 5 and sum(r.counts) == 8 for r in records)


def test_odd_targets_do_not_crash():
    def loss(out, x):
        empty = F.cross_entropy(out[:0], x[:0].argmax(1))           # an empty batch
        ones = F.nll_loss(out.log_softmax(1), x.argmax(1).float().long())
        unbatched = F.cross_entropy(out[0], x[0].argmax())          # (C,) and a 0-d target
        return ones + unbatched + empty.nan_to_num()
    records, report = _records(loss)
    assert [r.function for r in records] == ["nll_loss"] * 3
    assert not [f for f in report.findings if f.code == "MONITOR_ERROR"]


def test_the_class_count_is_the_losss_dim_1():
    """(N, C, H, W) logits: C classes (a uniform guess scores ln C), not the width W."""
    torch.manual_seed(0)
    model = nn.Conv2d(3, 4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with Monitor(model, optimizer, every=1) as monitor:
        for _ in range(3):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(torch.randn(2, 3, 6, 16)), torch.randint(0, 4, (2, 6, 16)))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    summary = monitor.report().loss
    assert summary["classes"] == 4 and math.isclose(summary["chance"], math.log(4))
    assert monitor._view().prediction_entropy is None   # measured over W: not the classes'


def test_flattened_targets_get_their_rows_back():
    tags = torch.arange(24).reshape(4, 6).clone()
    assert _with_rows(tags.reshape(-1), None).shape == (4, 6)            # a view: its base
    # a view of a view has the first tensor as its base: 1-D here, so the batch says
    assert _with_rows(torch.arange(24).view(4, 6).reshape(-1), 4).shape == (4, 6)
    assert _with_rows(tags[:, 1:].reshape(-1), 4).shape == (4, 5)        # a copy: the batch
    assert _with_rows(tags[:, 1:].reshape(-1), None).shape == (20,)      # neither: one per row
    assert _with_rows(tags[:, :, None], 4).shape == (4, 6)               # size-1 axes dropped
    assert _with_rows(tags.reshape(-1)[:12], 4).shape == (4, 3)          # part of a base


def _reference_interior_rows(grid, value):
    """Positions of ``value`` with another value before and after them in their row."""
    count = 0
    for row in grid:
        others = [i for i, v in enumerate(row) if v != value]
        count += sum(1 for i, v in enumerate(row)
                     if v == value and others and others[0] < i < others[-1])
    return count


grids = st.integers(1, 6).flatmap(lambda rows: st.integers(1, 8).flatmap(
    lambda cols: st.lists(st.lists(st.integers(0, 3), min_size=cols, max_size=cols),
                          min_size=rows, max_size=rows)))


@settings(max_examples=150, deadline=None)
@given(grids, st.integers(0, 3))
def test_interior_and_runs_match_a_plain_reading(grid, value):
    targets = torch.tensor(grid)
    count, interior, runs = _end_runs(targets == value)
    assert int(count) == sum(row.count(value) for row in grid)
    assert int(interior) == _reference_interior_rows(grid, value)
    assert int(runs.sum()) + int(interior) == int(count)
    columns = [list(column) for column in zip(*grid)]
    expected = min(_reference_interior_rows(grid, value),
                   _reference_interior_rows(columns, value))
    assert int(_ignored_interior(targets == value)) == expected


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10), st.integers(0, 6)), min_size=1, max_size=6),
       st.booleans(), st.integers(0, 3))
def test_padding_runs_are_never_interior(rows, left, pad):
    """Rows of content (values other than ``pad``) padded at one end to a common length: the
    padding is all in end runs, along the rows and (min over both axes) in ``_ignored_interior``."""
    width = max(n + extra for n, extra in rows) or 1
    grid = []
    for n, extra in rows:
        content = [(pad + 1 + (i * 7 + n) % 3) % 4 for i in range(n)]
        padded = content + [pad] * (width - n) if not left else [pad] * (width - n) + content
        grid.append(padded)
    targets = torch.tensor(grid)
    count, interior, runs = _end_runs(targets == pad)
    assert int(interior) == 0
    assert runs.tolist() == [width - n for n, _ in rows]
    assert int(_ignored_interior(targets == pad)) == 0


@settings(max_examples=100, deadline=None)
@given(st.integers(3, 12), st.integers(1, 10), st.integers(0, 3))
def test_a_value_between_scored_positions_is_interior(width, where, value):
    where = 1 + where % (width - 2)
    row = [(value + 1) % 4] * width
    row[where] = value
    grid = torch.tensor([row, row])
    assert int(_end_runs(grid == value)[1]) == 2
    image = torch.tensor([[row] * 3])      # (1, 3, width): inside along the width
    assert int(_ignored_interior(image == value)) == 3
