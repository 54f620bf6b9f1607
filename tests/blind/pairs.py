"""The shared harness of the blind pair folders: one cache of runs, what counts as an alarm, the
strict-xfail marks, the metric rule and the standard tests built from a folder's declaration.

Every folder asks the same questions of its programs (is the bug real; is the buggy program
named; are the fixed twin and the healthy programs quiet), so the answers are written once here
and a folder's ``test_pairs.py`` only declares its programs, its expectations and the tests that
are truly its own. A strict xfail is an expectation too: the day a MISSED program is named (or a
FALSE_ALARMS one goes quiet) the suite fails until the name is removed from the table.

A new folder (its modules expose what one of the runners below calls):
    from tests.blind import pairs
    RUNS = pairs.Monitored(__package__)    # run(fixed=, monitor=); or Pipelines / StepChecks /
                                           # BatchChecks
    MODULES, HEALTHY = ["cnn_bug"], ["healthy_cnn"]
    MISSED = {"cnn_bug": "why it is not named yet"}   # or a set: reason "no check yet"
    FALSE_ALARMS = {}                                 # a name -> why it alarms
    test_bug_is_real = pairs.each(MODULES, RUNS.bug_is_real)
    test_buggy_named_at_root_cause_first = pairs.each(MODULES, RUNS.named_first, xfail=MISSED)
    test_fixed_twin_quiet = pairs.each(MODULES + HEALTHY, RUNS.quiet, xfail=FALSE_ALARMS)
A test of its own uses ``RUNS.module(name)`` and ``RUNS.cached(name, "run", ...)``.
"""
import importlib
from collections.abc import Callable, Collection, Mapping, Sequence

import pytest

import gradhunt

NO_CHECK_YET = "no check yet"


def alarms(findings):
    """The warnings and errors: what a user is alarmed by (an info never is)."""
    return [f for f in findings if f.severity in ("warning", "error")]


def describe(findings):
    """What a failing assertion shows of the findings, short enough to read in a list."""
    return [(f.code, f.severity, f.location, f.message[:160]) for f in findings]


def xfail_marked(names: Sequence[str], table: Collection[str] = (), *,
                 reason: str = NO_CHECK_YET):
    """``names`` as parameters, those in ``table`` (a set, or a dict of reasons) strict xfail."""
    reasons = table if isinstance(table, Mapping) else dict.fromkeys(table, reason)
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=reasons[n]))
            if n in reasons else n for n in names]


def each(names: Sequence[str], judge: Callable[[str], None], *, xfail: Collection[str] = (),
         cpu_dependent: Mapping[str, str] | None = None):
    """A test function asking ``judge(name)`` of each name (test ids: the names).
    ``cpu_dependent``: names whose outcome turns on a chaotic trajectory that differs between
    CPUs (name -> what differs): a non-strict xfail, a debt to pay by making the program
    robust, never a place for a pair that fails everywhere."""
    marked = xfail_marked(names, xfail)
    for index, name in enumerate(names):
        if cpu_dependent and name in cpu_dependent:
            marked[index] = pytest.param(name, marks=pytest.mark.xfail(
                strict=False, reason=f"CPU-dependent: {cpu_dependent[name]}"))

    @pytest.mark.parametrize("name", marked)
    def test(name):
        judge(name)
    return test


def assert_clearly_better(buggy: float, fixed: float, *, higher_is_better: bool, shown):
    """The fixed twin's quality number is clearly better: accuracies at least 10 points higher,
    errors at most 70% of the buggy one. A NaN on either side fails both comparisons."""
    if higher_is_better:
        assert fixed >= buggy + 0.10, shown
    else:
        assert fixed <= 0.7 * buggy, shown


class Folder:
    """A folder's program modules and the cache of their runs (a run trains: seconds each)."""

    def __init__(self, package: str, *, requires: Mapping[str, str] | None = None):
        self.package = package
        self.requires = dict(requires or {})    # program -> an optional module it imports
        self._runs = {}

    def module(self, name: str):
        return importlib.import_module(f"{self.package}.{name}")

    def cached(self, name: str, function: str, *args, **kwargs):
        """``module(name).function(*args, **kwargs)``, run once per arguments (a raise is not
        kept); skipped when the program needs an optional module that is not installed."""
        key = (name, function, args, tuple(sorted(kwargs.items())))
        if key not in self._runs:
            if name in self.requires:
                pytest.importorskip(self.requires[name])
            self._runs[key] = getattr(self.module(name), function)(*args, **kwargs)
        return self._runs[key]


class Monitored(Folder):
    """Programs with ``EXPECTED`` and ``run(fixed=, monitor=)`` -> dict(report, metric,
    higher_is_better), judged by the Monitor's report; healthy programs may have only
    ``run(monitor=)`` (``healthy_quiet``)."""

    def run(self, name, fixed, monitor):
        return self.cached(name, "run", fixed=fixed, monitor=monitor)

    def bug_is_real(self, name):
        buggy, fixed = self.run(name, False, False), self.run(name, True, False)
        assert buggy["report"] is None and fixed["report"] is None
        assert buggy["higher_is_better"] == fixed["higher_is_better"]
        assert_clearly_better(buggy["metric"], fixed["metric"],
                              higher_is_better=fixed["higher_is_better"],
                              shown=(name, buggy["metric"], fixed["metric"]))

    def named_first(self, name):
        report = self.run(name, False, True)["report"]
        found, expected = alarms(report.findings), self.module(name).EXPECTED
        assert found, f"{name}: no warning or error on the buggy program\n{report}"
        assert found[0].code == expected, (
            f"{name}: first alarm {found[0].code}, expected {expected}; "
            f"alarms {describe(found)}\n{report}")

    def quiet(self, name):
        self._assert_quiet(name, self.run(name, True, True)["report"])

    def healthy_quiet(self, name):
        self._assert_quiet(name, self.cached(name, "run", monitor=True)["report"])

    @staticmethod
    def _assert_quiet(name, report):
        found = alarms(report.findings)
        assert not found, f"{name}: alarms on the fixed/healthy program {describe(found)}\n{report}"


class Pipelines(Folder):
    """Pipelines with ``EXPECTED`` (and ``KEYWORD``, which the finding's message must hold),
    ``build(fixed)`` -> dict(train=, test=) and ``train(fixed)`` -> dict(metric,
    higher_is_better, evidence; with KEYWORD, a leak, also reported and honest), judged by
    ``gradhunt.validate_data(train, test=test)``."""

    def findings(self, name, fixed):
        parts = self.module(name).build(fixed=fixed)
        return list(gradhunt.validate_data(parts["train"], test=parts["test"]))

    def bug_is_real(self, name):
        buggy = self.cached(name, "train", fixed=False)
        fixed = self.cached(name, "train", fixed=True)
        assert buggy["higher_is_better"] == fixed["higher_is_better"]
        if getattr(self.module(name), "KEYWORD", None):    # a leak: the reported score lies
            assert buggy["reported"] >= buggy["honest"] + 0.15, (name, buggy["evidence"])
            assert fixed["reported"] <= fixed["honest"] + 0.07, (name, fixed["evidence"])
            return
        assert_clearly_better(buggy["metric"], fixed["metric"],
                              higher_is_better=fixed["higher_is_better"],
                              shown=(name, buggy["evidence"], fixed["evidence"]))

    def named(self, name):
        module, found = self.module(name), alarms(self.findings(name, False))
        keyword = getattr(module, "KEYWORD", None)
        hits = [f for f in found if f.code == module.EXPECTED
                and (keyword is None or keyword in f.message)]
        assert hits, (f"{name}: no {module.EXPECTED} warning/error"
                      f"{' with ' + repr(keyword) if keyword else ''}; alarms {describe(found)}")

    def quiet(self, name):
        found = alarms(self.findings(name, True))
        assert not found, f"{name}: alarms on the fixed twin {describe(found)}"


class StepChecks(Folder):
    """Steps with ``EXPECTED = (code, keyword)`` and ``build(fixed)`` -> dict(model, loss_fn,
    inputs, targets, train_step, optimizer), built afresh for every check (a step trains its
    arguments), judged by ``gradhunt.check_step_equivalence``. Whether the bug is real is the
    folder's own gradient measurement."""

    def check(self, name, fixed):
        objs = self.module(name).build(fixed)
        return gradhunt.check_step_equivalence(
            objs["model"], objs["loss_fn"], objs["inputs"], objs["targets"],
            train_step=objs["train_step"], optimizer=objs["optimizer"])

    def named(self, name):
        code, keyword = self.module(name).EXPECTED
        result = self.check(name, False)
        hits = [f for f in alarms(result) if f.code == code and keyword in f.message]
        assert hits, (f"{name}: no {code} mentioning {keyword!r}; alarms "
                      f"{describe(alarms(result))}\n{result}")

    def quiet(self, name):
        result = self.check(name, True)
        assert result.passed is True, (
            f"{name}: alarms on the fixed twin {describe(alarms(result))}\n{result}")


class BatchChecks(Folder):
    """Models with ``EXPECTED`` (a finding code), ``build(fixed)`` -> dict(model, inputs,
    options) (the keyword options of the check, e.g. ``pad_value=``) and ``train(fixed)`` ->
    dict(metric, higher_is_better, evidence), judged by ``gradhunt.check_batch_independence(
    model, inputs, **options)``. ``bug_is_real`` applies the metric rule; a folder whose quality
    does not separate for a program measures the output's dependence on the batch itself."""

    def check(self, name, fixed):
        objs = self.module(name).build(fixed)
        return gradhunt.check_batch_independence(objs["model"], objs["inputs"],
                                                 **objs.get("options", {}))

    def bug_is_real(self, name):
        buggy = self.cached(name, "train", fixed=False)
        fixed = self.cached(name, "train", fixed=True)
        assert buggy["higher_is_better"] == fixed["higher_is_better"]
        assert_clearly_better(buggy["metric"], fixed["metric"],
                              higher_is_better=fixed["higher_is_better"],
                              shown=(name, buggy["evidence"], fixed["evidence"]))

    def named(self, name):
        expected, found = self.module(name).EXPECTED, alarms(self.check(name, False))
        assert any(f.code == expected for f in found), (
            f"{name}: no {expected} warning/error; alarms {describe(found)}")

    def quiet(self, name):
        found = alarms(self.check(name, True))
        assert not found, f"{name}: alarms on the fixed/healthy model {describe(found)}"
