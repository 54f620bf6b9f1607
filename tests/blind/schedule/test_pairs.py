"""Blind pairs: a learning-rate scheduler stepped at another rate than the unit of its settings.

Root cause (the clause of the training-step contract): a scheduler's settings are in the unit it
was built for. A schedule configured in epochs (StepLR(step_size=30), MultiStepLR([30, 80]),
CosineAnnealingLR(T_max=epochs), ExponentialLR(gamma=0.95), PolynomialLR(total_iters=epochs))
whose ``scheduler.step()`` is called every batch consumes its whole decay in a small fraction of
the run: the rate collapses to ~0, or a cosine cycles up and down, and the rest of the run learns
nothing or thrashes (LR_SCHEDULE_TOO_FAST). The mirror image: a warm-up built in optimizer steps
stepped once per epoch never hands over, and the rate stays at a small fraction of its peak for
the whole run (LR_WARMUP_NEVER_ENDS). A user must be told which scheduler, that it is stepped per
batch (or per epoch) while its settings are in the other unit, what the rate did, and the fix.

Each module under this folder is a small training program written from that paragraph and the
README alone; each exposes ``EXPECTED`` and ``run(fixed=, monitor=)``. For every module:
(1) the bug is real: the fixed twin's own quality number is clearly better than the buggy one's;
(2) the Monitor's first alarm (warning or error) on the buggy program is ``EXPECTED``;
(3) the Monitor raises no warning or error on the fixed twin.

When written (before any check for these pairs): (1) held on all 7 pairs and (3) on all 7 fixed
twins; (2) held on transformer_cosine and mlp_polynomial only. cnn_steplr and lstm_multistep got
LOSS_PLATEAU + LOSS_AT_CHANCE, bow_exponential LOSS_PLATEAU, and the two warm-ups
(mlp_warmup, attention_linear_warmup) no alarm at all. The whole file takes ~40 s of CPU.
"""
import functools
import importlib

import pytest

MODULES = [
    "cnn_steplr",
    "lstm_multistep",
    "transformer_cosine",
    "bow_exponential",
    "mlp_polynomial",
    "mlp_warmup",
    "attention_linear_warmup",
]


@functools.lru_cache(maxsize=None)
def _run(name, fixed, monitor):
    module = importlib.import_module(f"{__package__}.{name}")
    return module.run(fixed=fixed, monitor=monitor)


def _expected(name):
    return importlib.import_module(f"{__package__}.{name}").EXPECTED


def _alarms(report):
    return [f for f in report.findings if f.severity in ("warning", "error")]


def _describe(alarms):
    return [(f.code, f.severity, f.location) for f in alarms]


@pytest.mark.parametrize("name", MODULES)
def test_bug_is_real(name):
    buggy = _run(name, False, False)
    fixed = _run(name, True, False)
    assert buggy["report"] is None and fixed["report"] is None
    assert buggy["higher_is_better"] == fixed["higher_is_better"]
    b, f = buggy["metric"], fixed["metric"]
    if fixed["higher_is_better"]:      # accuracies: at least 10 points better
        assert f >= b + 0.10, (name, b, f)
    else:                              # errors (MSE): at most 70% of the buggy one
        assert f <= 0.7 * b, (name, b, f)


@pytest.mark.parametrize("name", MODULES)
def test_buggy_named_at_root_cause_first(name):
    report = _run(name, False, True)["report"]
    alarms = _alarms(report)
    assert alarms, f"{name}: no warning or error on the buggy program\n{report}"
    assert alarms[0].code == _expected(name), (
        f"{name}: first alarm {alarms[0].code}, expected {_expected(name)}; "
        f"alarms {_describe(alarms)}\n{report}")


@pytest.mark.parametrize("name", MODULES)
def test_fixed_twin_quiet(name):
    report = _run(name, True, True)["report"]
    alarms = _alarms(report)
    assert not alarms, f"{name}: alarms on the fixed twin {_describe(alarms)}\n{report}"
