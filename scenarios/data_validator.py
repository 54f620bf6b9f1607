"""Exercise 4: a deliberately corrupted data set; ``validate_data`` finds every corruption.

The clean set is scikit-learn's digits, split, standardised, constant pixels dropped: it must
give no finding at all. Then five corruptions are planted with a private generator, each with
its ground truth: NaN and Inf values in training rows, test rows copied into the training
set, a class cut down to under a tenth of the others, features left on a scale a hundred times
too large, and a feature stuck at one value. Each must be reported with the planted counts
and indices, and nothing else may be reported.
"""
from dataclasses import dataclass, field

import numpy as np

from diagnostics import validate_data

from . import digits
from .result import ScenarioResult

NAME = "data_validator"
TITLE = "a deliberately corrupted data set; every corruption found"
SEED = 4
FAST_ROWS = 700          # the fast setting uses this many digits, the full one all 1797
RARE_CLASS = 3
SCALE = 100.0


@dataclass
class Corrupted:
    """The corrupted arrays and what was planted in them."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    truth: dict = field(default_factory=dict)


def clean_split(*, rows=None):
    """Standardised digits without constant pixels; ``rows`` limits the examples used."""
    split = digits.load_split(rows=rows)
    varying = np.ptp(split.x_train, axis=0) > 0
    return split.x_train[:, varying], split.y_train, split.x_test[:, varying], split.y_test


def corrupt(x_train, y_train, x_test, y_test, *, seed=SEED):
    """Plant the five corruptions; returns a ``Corrupted`` with the ground truth."""
    rng = np.random.default_rng(seed)
    truth = {}
    rare = np.flatnonzero(y_train == RARE_CLASS)
    others = np.bincount(y_train[y_train != RARE_CLASS]).max()
    keep_rare = max(1, others // 15)
    kept = np.setdiff1d(np.arange(len(y_train)), rare[keep_rare:])
    x_train, y_train = x_train[kept], y_train[kept]
    truth["rare_class"] = RARE_CLASS

    leaked = np.sort(rng.choice(len(x_test), size=max(5, len(x_test) // 20), replace=False))
    first_copy = len(x_train)
    x_train = np.concatenate([x_train, x_test[leaked]])
    y_train = np.concatenate([y_train, y_test[leaked]])
    truth["leaked_test_rows"] = leaked
    truth["leaked_train_rows"] = np.arange(first_copy, first_copy + len(leaked))

    features = x_train.shape[1]
    scaled = np.sort(rng.choice(features, size=3, replace=False))
    constant = int(rng.choice(np.setdiff1d(np.arange(features), scaled)))
    x_train, x_test = x_train.copy(), x_test.copy()
    for x in (x_train, x_test):
        x[:, scaled] *= SCALE
        x[:, constant] = 0.0
    truth["scaled_features"], truth["constant_feature"] = scaled, constant

    candidates = np.arange(first_copy)  # not the leaked copies, which must stay equal to test rows
    bad_rows = rng.choice(candidates, size=9, replace=False)
    nan_rows, inf_rows = np.sort(bad_rows[:6]), np.sort(bad_rows[6:])
    x_train[nan_rows, rng.integers(0, features, len(nan_rows))] = np.nan
    x_train[inf_rows, rng.integers(0, features, len(inf_rows))] = np.inf
    truth["nan_rows"], truth["inf_rows"] = nan_rows, inf_rows
    return Corrupted(x_train, y_train, x_test, y_test, truth)


def run(*, fast=False):
    """Validate the clean set, then the corrupted one, and compare with the ground truth."""
    result = ScenarioResult(NAME, TITLE, fast)
    with result.timed():
        clean = clean_split(rows=FAST_ROWS if fast else None)
        result.section("the clean data set (standardised digits, constant pixels dropped)")
        report = validate_data(clean[0], clean[1], test_x=clean[2], test_y=clean[3])
        result.say(report)
        result.check("the clean data set gives no finding", not report.findings,
                     f"{len(report.findings)} finding(s)")
        data = corrupt(*clean)
        result.section("the corrupted data set")
        result.say(_planted_text(data.truth))
        report = validate_data(data.train_x, data.train_y, test_x=data.test_x,
                               test_y=data.test_y)
        result.say(report)
        _check_findings(result, report, data.truth)
    return result


def _planted_text(truth):
    return "\n".join([
        "planted:",
        f"  NaN in train rows {truth['nan_rows'].tolist()}, Inf in train rows "
        f"{truth['inf_rows'].tolist()}",
        f"  {len(truth['leaked_test_rows'])} test rows copied into the training set "
        f"(test rows {truth['leaked_test_rows'][:5].tolist()}, ...)",
        f"  class {truth['rare_class']} cut down to under 1/10 of the largest class",
        f"  features {truth['scaled_features'].tolist()} multiplied by {SCALE:g}",
        f"  feature {truth['constant_feature']} set to 0 everywhere"])


def _check_findings(result, report, truth):
    found = {}
    for finding in report.findings:
        found.setdefault((finding.code, finding.severity), []).append(finding)

    def one(code, severity):
        hits = found.get((code, severity), [])
        return hits[0].evidence if len(hits) == 1 else None

    nonfinite = one("DATA_NONFINITE", "error")
    bad_rows = np.sort(np.concatenate([truth["nan_rows"], truth["inf_rows"]]))
    result.check("NaN/Inf: DATA_NONFINITE with the planted counts and rows",
                 nonfinite is not None and nonfinite["nan"] == len(truth["nan_rows"])
                 and nonfinite["inf"] == len(truth["inf_rows"])
                 and nonfinite["rows"] == len(bad_rows)
                 and list(nonfinite["example_rows"]) == bad_rows[:5].tolist(),
                 _evidence_text(nonfinite, ("nan", "inf", "rows", "example_rows")))
    leakage = one("DATA_LEAKAGE", "warning")
    leaked = truth["leaked_test_rows"]
    result.check("train/test duplicates: DATA_LEAKAGE with every copied row",
                 leakage is not None and leakage["duplicates"] == len(leaked)
                 and list(leakage["example_test_rows"]) == leaked[:5].tolist()
                 and list(leakage["example_train_rows"])
                 == truth["leaked_train_rows"][:5].tolist(),
                 _evidence_text(leakage, ("duplicates", "example_test_rows",
                                          "example_train_rows")))
    imbalance = one("LABEL_IMBALANCE", "warning")
    result.check(f"rare class: LABEL_IMBALANCE names class {truth['rare_class']} as the smallest",
                 imbalance is not None and imbalance["smallest"] == truth["rare_class"]
                 and imbalance["ratio"] > 10,
                 _evidence_text(imbalance, ("ratio", "largest", "smallest")))
    scale = one("UNNORMALIZED_INPUT", "warning")
    result.check("scaled features: UNNORMALIZED_INPUT names exactly the planted features",
                 scale is not None and scale["features"] == len(truth["scaled_features"])
                 and sorted(scale["example_features"]) == truth["scaled_features"].tolist(),
                 _evidence_text(scale, ("features", "example_features")))
    constant = one("UNNORMALIZED_INPUT", "info")
    result.check("constant feature: UNNORMALIZED_INPUT (info) names it",
                 constant is not None and constant["constant_features"] == 1
                 and list(constant["example_features"]) == [truth["constant_feature"]],
                 _evidence_text(constant, ("constant_features", "example_features")))
    expected = {("DATA_NONFINITE", "error"), ("DATA_LEAKAGE", "warning"),
                ("LABEL_IMBALANCE", "warning"), ("UNNORMALIZED_INPUT", "warning"),
                ("UNNORMALIZED_INPUT", "info")}
    extra = [f"{code} ({severity})" for code, severity in found if (code, severity) not in expected]
    result.check("nothing reported that was not planted", not extra and not report.passed,
                 f"extra: {', '.join(extra) or 'none'}")


def _evidence_text(evidence, keys):
    if evidence is None:
        return "not reported (or reported more than once)"
    return ", ".join(f"{key} {_short(evidence[key])}" for key in keys)


def _short(value):
    if isinstance(value, np.ndarray):
        value = value.tolist()
    return f"{value:.3g}" if isinstance(value, float) else str(value)
