"""validate_data on a million rows: how long the whole check and its duplicate search take.

Train: 1,000,000 rows x 32 float32 features; test: 200,000 rows, 1,000 of them copies of
training rows. The duplicate search (row hashing + sort + byte-for-byte confirmation) is timed
against the obvious baseline in the same run, a Python dict from each training row's bytes to
its index. The last line is the baseline's time over the hashing search's (higher is better).

    python benchmarks/validate_data_speed.py
"""
import time

import numpy as np

from diagnostics import validate_data
from diagnostics.tools.data_validation import _leaked_rows

TRAIN_ROWS, TEST_ROWS, FEATURES, PLANTED = 1_000_000, 200_000, 32, 1_000


def _data():
    rng = np.random.default_rng(0)
    train = rng.standard_normal((TRAIN_ROWS, FEATURES)).astype(np.float32)
    test = rng.standard_normal((TEST_ROWS, FEATURES)).astype(np.float32)
    test[rng.choice(TEST_ROWS, PLANTED, replace=False)] = train[rng.choice(TRAIN_ROWS, PLANTED,
                                                                           replace=False)]
    labels = rng.integers(0, 10, TRAIN_ROWS)
    return train, labels, test


def _dict_baseline(train, test):
    index = {row.tobytes(): i for i, row in enumerate(train)}
    return [(t, index[row.tobytes()]) for t, row in enumerate(test) if row.tobytes() in index]


def _best_of(function, repeats=3):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def main():
    train, labels, test = _data()
    full, report = _best_of(lambda: validate_data(train, labels, test_x=test))
    hashed, pairs = _best_of(lambda: _leaked_rows(train, test))
    baseline, expected = _best_of(lambda: _dict_baseline(train, test), repeats=1)
    assert sorted(pairs) == sorted(expected) and len(pairs) == PLANTED
    print(f"validate_data, {TRAIN_ROWS:,} train + {TEST_ROWS:,} test rows x {FEATURES} features: "
          f"{full:.2f} s ({report.counts['duplicates_train_test']} duplicates found)")
    print(f"duplicate search: row hashing {hashed:.2f} s, "
          f"Python dict of row bytes {baseline:.2f} s")
    print(f"duplicate search speed-up over a dict of row bytes: {baseline / hashed:.1f}x")


if __name__ == "__main__":
    main()
