"""The hunt: plant every catalogued bug on every backend, run its diagnostic, judge the answer.

Each run builds a fresh bench, plants one bug, runs the diagnostic the catalogue names
(``bug.probe``) and compares what it says with the bug's ground truth: the first finding with
one of the expected codes must point at the culprit (and, for gradient bugs, name the path and
the pattern). Healthy controls run the same diagnostics on the same benches with nothing
planted; any warning or error there is a false alarm. The hunt passes when every bug is found
and every control is clean.
"""
import contextlib
import time
import warnings
from dataclasses import dataclass, field

from diagnostics.backends import torch_threads

from .bench import make_bench
from .catalog import catalog
from .diagnose import run_probe
from .models import BACKENDS
from .state import changes, snapshot

FOUND, MISPLACED, MISSED = "found", "misplaced", "missed"
CLEAN, FALSE_ALARM = "clean", "false alarm"
ERROR = "error"
ALARMS = ("warning", "error")


@dataclass(kw_only=True)
class Outcome:
    """One run: a bug (or a control) on one backend, what was found, and the verdict."""

    name: str
    kind: str                    # the bug's kind, or "control"
    backend: str
    probe: str
    setup: str
    codes: list                  # codes of the warning and error findings, in report order
    found: str                   # where the deciding finding points ("-" when none)
    expected: str
    verdict: str
    seconds: float
    code: str = ""               # the deciding finding's code
    message: str = ""            # the deciding finding's message, or the error
    warnings: list = field(default_factory=list)
    leftovers: list = field(default_factory=list)   # patches still in place after the run
    diagnosis: object = None     # the probe's Diagnosis (not in to_dict)

    @property
    def ok(self):
        return self.verdict in (FOUND, CLEAN)

    def to_dict(self):
        return {"name": self.name, "kind": self.kind, "backend": self.backend,
                "probe": self.probe, "setup": self.setup, "codes": list(self.codes),
                "found": self.found, "expected": self.expected, "verdict": self.verdict,
                "ok": self.ok, "seconds": round(self.seconds, 3), "code": self.code,
                "message": self.message, "warnings": list(self.warnings),
                "leftovers": list(self.leftovers)}


@dataclass
class HuntResult:
    """Every outcome, bugs first; the score; ``passed`` when nothing was missed or misplaced
    and every control stayed clean."""

    outcomes: list
    seconds: float

    @property
    def bugs(self):
        return [o for o in self.outcomes if o.kind != "control"]

    @property
    def controls(self):
        return [o for o in self.outcomes if o.kind == "control"]

    @property
    def passed(self):
        return all(o.ok for o in self.outcomes)

    def score(self):
        """The score line."""
        found = sum(o.verdict == FOUND for o in self.bugs)
        clean = sum(o.verdict == CLEAN for o in self.controls)
        missed = [o for o in self.bugs if o.verdict != FOUND]
        return (f"score: {found}/{len(self.bugs)} planted bugs found and localized "
                f"({len(missed)} missed, misplaced or failed), {clean}/{len(self.controls)} "
                f"healthy controls clean, in {self.seconds:.1f} s")

    def to_dict(self):
        return {"passed": self.passed, "seconds": round(self.seconds, 2),
                "bugs_found": sum(o.verdict == FOUND for o in self.bugs),
                "bugs": len(self.bugs),
                "controls_clean": sum(o.verdict == CLEAN for o in self.controls),
                "controls": len(self.controls),
                "outcomes": [o.to_dict() for o in self.outcomes]}


def hunt(*, bugs=None, backends=BACKENDS, controls=True, progress=None):
    """Run the hunt. ``bugs``: names to run (all when None); ``backends``: which ones;
    ``controls``: also run the healthy controls of the benches and probes those bugs use;
    ``progress(done, total, outcome)`` is called after every run."""
    selected = catalog() if bugs is None else [b for b in catalog() if b.name in set(bugs)]
    unknown = set(bugs or ()) - {b.name for b in selected}
    if unknown:
        raise KeyError(f"no bug called {', '.join(sorted(unknown))}; catalogued: "
                       f"{', '.join(b.name for b in catalog())}")
    jobs = [(run_bug, bug, bug.setup, backend) for bug in selected for backend in backends
            if backend in bug.backends]
    if controls:
        pairs = dict.fromkeys((bug.probe, bug.setup) for bug in selected)
        jobs += [(run_control, probe, setup, backend) for probe, setup in pairs
                 for backend in backends]
    start = time.perf_counter()
    outcomes = []
    with single_threaded_torch(backends):
        for job, subject, setup, backend in jobs:
            outcomes.append(job(subject, make_bench(setup, backend)))
            if progress is not None:
                progress(len(outcomes), len(jobs), outcomes[-1])
    return HuntResult(outcomes, time.perf_counter() - start)


def run_bug(bug, bench):
    """Plant ``bug`` in ``bench`` (a fresh one of ``bug.setup``), run its probe and judge.

    Afterwards nothing may stay patched (values and modes may differ: the probe may train);
    a leftover patch makes the verdict "error"."""
    def diagnose():
        with bug.planted(bench):
            return run_probe(bug.probe, bench)

    before = snapshot(bench)
    outcome = _run(bug.name, bug.kind, bench, bug.probe, bug.expected, diagnose)
    if outcome.diagnosis is not None:
        outcome.verdict, outcome.found, hit = judge(bug, outcome.diagnosis)
        if hit is not None:
            outcome.code, outcome.message = hit.code, hit.message
    outcome.leftovers = changes(before, snapshot(bench), values=False)
    if outcome.leftovers:
        outcome.verdict = ERROR
        outcome.message = "still patched after the run: " + "; ".join(outcome.leftovers)
    return outcome


def run_control(probe, bench):
    """Run ``probe`` on a healthy bench: clean unless a warning or error appears."""
    outcome = _run(f"healthy {bench.setup} ({probe})", "control", bench, probe, "clean",
                   lambda: run_probe(probe, bench))
    if outcome.diagnosis is not None:
        alarms = [f for f in outcome.diagnosis.findings if f.severity in ALARMS]
        outcome.verdict = FALSE_ALARM if alarms else CLEAN
        if alarms:
            outcome.found, outcome.code = alarms[0].location or "-", alarms[0].code
            outcome.message = alarms[0].message
    return outcome


def _run(name, kind, bench, probe, expected, diagnose):
    start = time.perf_counter()
    outcome = Outcome(name=name, kind=kind, backend=bench.backend, probe=probe,
                      setup=bench.setup, codes=[], found="-", expected=expected, verdict=ERROR,
                      seconds=0.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            outcome.diagnosis = diagnose()
        except Exception as error:  # a crash is reported as this run's verdict, the hunt goes on
            outcome.message = f"{type(error).__name__}: {error}"
    outcome.seconds = time.perf_counter() - start
    outcome.warnings = list(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))
    if outcome.diagnosis is not None:
        outcome.codes = list(dict.fromkeys(f.code for f in outcome.diagnosis.findings
                                           if f.severity in ALARMS))
    return outcome


def judge(bug, diagnosis):
    """``(verdict, where it points, the finding)``; the first finding with an expected code
    decides."""
    hit = next((f for f in diagnosis.findings if f.code in bug.codes), None)
    if hit is None:
        return MISSED, "-", None
    path, pattern = diagnosis.paths.get(hit.location), diagnosis.patterns.get(hit.location)
    found = hit.location or "-"
    if bug.path is not None:
        found += f" {path}"
    if bug.pattern is not None or (pattern is not None and pattern != "unexplained"):
        found += f", {pattern}"
    right = ((bug.culprit is None or hit.location == bug.culprit)
             and (bug.path is None or path == bug.path)
             and (bug.pattern is None or pattern == bug.pattern))
    return (FOUND if right else MISPLACED), found, hit


def single_threaded_torch(backends):
    """One torch thread while the hunt runs (its models are tiny), the old count afterwards."""
    return torch_threads(1) if "torch" in backends else contextlib.nullcontext()
