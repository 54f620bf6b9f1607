"""``UnitActivity`` agrees with its definition: a unit is dead when its magnitude was exactly 0
in every one of the last ``window`` sampled steps (NaN is not 0)."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from diagnostics.monitor.records import ActivationRecord
from diagnostics.monitor.units import UnitActivity

_VALUES = st.sampled_from([0.0, 0.0, 0.0, -0.0, 1.5, 3.0, np.nan])


@settings(max_examples=150, deadline=None)
@given(window=st.integers(1, 6), units=st.integers(1, 5), data=st.data())
def test_dead_units_and_examples_follow_the_window(window, units, data):
    steps = data.draw(st.lists(
        st.tuples(hnp.arrays(np.float64, units, elements=_VALUES), st.integers(0, 9)),
        min_size=1, max_size=12))
    activity = UnitActivity(window)
    for i, (magnitude, examples) in enumerate(steps):
        activity.add_magnitude("layer", magnitude, examples)
        kept = steps[max(0, i + 1 - window):i + 1]
        with np.errstate(invalid="ignore"):
            expected = np.max([m for m, _ in kept], axis=0) == 0
        total = sum(e for _, e in kept)
        assert activity.examples("layer") == (total, len(kept))
        dead = activity.dead("layer", min_examples=0, min_samples=1)
        np.testing.assert_array_equal(dead, expected)
        assert activity.dead("layer", min_examples=total + 1, min_samples=1) is None


@settings(max_examples=60, deadline=None)
@given(high=hnp.arrays(np.float64, 4, elements=_VALUES),
       low=hnp.arrays(np.float64, 4, elements=_VALUES))
def test_an_activation_record_counts_a_unit_by_its_largest_magnitude(high, low):
    unit_max, unit_min = np.maximum(high, low), np.minimum(high, low)
    activity = UnitActivity(3)
    activity.add("layer", ActivationRecord(8, 0.0, 0.0, 0.0, 0.0, unit_max, unit_min))
    with np.errstate(invalid="ignore"):
        expected = np.maximum(np.abs(unit_max), np.abs(unit_min)) == 0
    np.testing.assert_array_equal(activity.dead("layer", min_examples=0, min_samples=1),
                                  expected)
