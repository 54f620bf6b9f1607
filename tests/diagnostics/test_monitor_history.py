"""History: losses arriving in bulk (one transfer per sampled step) give what step-by-step
arrival gives, and the loss level is the lowest median of LEVEL_STEPS consecutive losses."""
import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from diagnostics.monitor.history import LEVEL_STEPS, History, Series

_losses = st.lists(st.one_of(st.floats(0, 10), st.just(math.nan), st.just(math.inf),
                             st.just(-math.inf)),
                   max_size=120)


def _levels(values):
    """The reference: medians of complete, consecutive blocks of LEVEL_STEPS, the finite lowest."""
    blocks = [np.median(values[i:i + LEVEL_STEPS])
              for i in range(0, len(values) - LEVEL_STEPS + 1, LEVEL_STEPS)]
    finite = [b for b in blocks if np.isfinite(b)]
    return min(finite) if finite else None


@given(_losses, st.lists(st.integers(1, 60), min_size=1))
def test_losses_in_chunks_match_the_reference(values, chunk_sizes):
    history = History(["step", "loss"])
    start, sizes = 0, iter(chunk_sizes * (len(values) + 1))
    while start < len(values):
        size = next(sizes)
        history.add_losses(values[start:start + size])
        start += size
    np.testing.assert_array_equal(history.losses, np.asarray(values, dtype=np.float64))
    bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
    assert history.first_nonfinite_step == (bad[0] if bad else None)
    assert history.best_level == _levels(values)
    assert history.steps == len(values)


@given(_losses)
def test_losses_one_step_at_a_time_match_the_reference(values):
    """``every=1``: one loss per transfer takes a path without NumPy; the same numbers."""
    history = History(["step", "loss"])
    for value in values:
        history.add_losses([float(value)])
    np.testing.assert_array_equal(history.losses, np.asarray(values, dtype=np.float64))
    bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
    assert history.first_nonfinite_step == (bad[0] if bad else None)
    assert history.best_level == _levels(values)


def test_series_values_are_views_that_later_appends_leave_alone():
    series = Series()
    series.extend(range(300))
    before = series.values
    series.append(7.0)
    assert before.size == 300 and len(series) == 301 and series.values[-1] == 7.0
    assert not before.flags.writeable
