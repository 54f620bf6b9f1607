"""The planted part of the hunt: plant every catalogued bug on every backend, run its tool,
judge the answer.

Each run builds a fresh bench, plants one bug, runs the tool the catalogue names
(``bug.tool``) and compares what it says with the bug's ground truth: the first finding with
one of the expected codes must point at the culprit (and, for gradient bugs, name the path and
the pattern). Healthy controls run the same tools on the same benches with nothing planted;
any warning or error there is a false alarm. The hunt passes when every bug is found and every
control is clean.
"""
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

from diagnostics import Finding

from ..case import Case
from ..planted.catalog import Bug, catalog
from ..planted.state import changes, snapshot
from ..reference.bench import Bench, make_bench
from ..reference.loop import train
from ..reference.models import BACKENDS
from ..tools import Diagnosis, run_tool
from .runner import guarded_run, run_all

FOUND, MISPLACED, MISSED = "found", "misplaced", "missed"
CLEAN, FALSE_ALARM = "clean", "false alarm"
ERROR = "error"
GRADCHECK_ROWS = 8
HEADERS = ("bug", "backend", "findings", "culprit found", "expected", "verdict")


@dataclass(kw_only=True)
class Outcome:
    """One run: a bug (or a control) on one backend, what was found, and the verdict."""

    name: str
    kind: str                    # the bug's kind, or "control"
    backend: str
    tool: str
    setup: str
    codes: list[str]             # codes of the warning and error findings, in report order
    found: str                   # where the deciding finding points ("-" when none)
    expected: str
    verdict: str
    seconds: float
    code: str = ""               # the deciding finding's code
    message: str = ""            # the deciding finding's message, or the error
    warnings: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)   # patches still in place after the run
    diagnosis: Diagnosis | None = None     # the tool's Diagnosis (not in to_dict)

    @property
    def ok(self) -> bool:
        return self.verdict in (FOUND, CLEAN)

    def row(self) -> tuple[str, ...]:
        """This run's row of the hunt table."""
        verdict = self.verdict.upper() if not self.ok else self.verdict
        return (self.name, self.backend, self._findings(), self.found, self.expected, verdict)

    def _findings(self) -> str:
        """The deciding code first, then how many other warning/error codes came with it."""
        if not self.codes:
            return "-"
        first = self.code or self.codes[0]
        others = len([c for c in self.codes if c != first])
        return f"{first} +{others}" if others else first

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "backend": self.backend,
                "tool": self.tool, "setup": self.setup, "codes": list(self.codes),
                "found": self.found, "expected": self.expected, "verdict": self.verdict,
                "ok": self.ok, "seconds": round(self.seconds, 3), "code": self.code,
                "message": self.message, "warnings": list(self.warnings),
                "leftovers": list(self.leftovers)}


@dataclass
class HuntResult:
    """Every outcome, bugs first; the score; ``passed`` when nothing was missed or misplaced
    and every control stayed clean."""

    outcomes: list[Outcome]
    seconds: float
    headers = HEADERS

    @property
    def bugs(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind != "control"]

    @property
    def controls(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind == "control"]

    @property
    def passed(self) -> bool:
        return all(o.ok for o in self.outcomes)

    def sections(self) -> list[list[tuple[str, ...]]]:
        """The table's rows: the bugs, then the controls (when any ran)."""
        controls = [o.row() for o in self.controls]
        return [[o.row() for o in self.bugs], *([controls] if controls else [])]

    def notes(self) -> list[str]:
        """A line for each run that did not pass, with its message."""
        return [f"{o.verdict.upper()}: {o.name} on {o.backend}: {o.message}"
                for o in self.outcomes if not o.ok and o.message]

    def score(self) -> str:
        """The score line."""
        found = sum(o.verdict == FOUND for o in self.bugs)
        clean = sum(o.verdict == CLEAN for o in self.controls)
        missed = [o for o in self.bugs if o.verdict != FOUND]
        return (f"score: {found}/{len(self.bugs)} planted bugs found and localized "
                f"({len(missed)} missed, misplaced or failed), {clean}/{len(self.controls)} "
                f"healthy controls clean, in {self.seconds:.1f} s")

    def to_dict(self) -> dict:
        return {"passed": self.passed, "seconds": round(self.seconds, 2),
                "bugs_found": sum(o.verdict == FOUND for o in self.bugs),
                "bugs": len(self.bugs),
                "controls_clean": sum(o.verdict == CLEAN for o in self.controls),
                "controls": len(self.controls),
                "outcomes": [o.to_dict() for o in self.outcomes]}


def hunt(*, bugs: Iterable[str] | None = None, backends: Sequence[str] = BACKENDS,
         controls: bool = True,
         progress: Callable[[int, int, Outcome], None] | None = None) -> HuntResult:
    """Run the hunt. ``bugs``: names to run (all when None); ``backends``: which ones;
    ``controls``: also run the healthy controls of the benches and tools those bugs use;
    ``progress(done, total, outcome)`` is called after every run."""
    selected = catalog() if bugs is None else [b for b in catalog() if b.name in set(bugs)]
    unknown = set(bugs or ()) - {b.name for b in selected}
    if unknown:
        raise KeyError(f"no bug called {', '.join(sorted(unknown))}; catalogued: "
                       f"{', '.join(b.name for b in catalog())}")
    jobs = [partial(_on_fresh_bench, run_bug, bug, bug.setup, backend) for bug in selected
            for backend in backends if backend in bug.backends]
    if controls:
        pairs = dict.fromkeys((bug.tool, bug.setup) for bug in selected)
        jobs += [partial(_on_fresh_bench, run_control, tool, setup, backend)
                 for tool, setup in pairs for backend in backends]
    outcomes, seconds = run_all(jobs, backends=backends, progress=progress)
    return HuntResult(outcomes, seconds)


def _on_fresh_bench(job, subject, setup, backend):
    return job(subject, make_bench(setup, backend))


def bench_case(bench: Bench) -> Case:
    """The tools' view of ``bench`` as it is now (a planted bug in, if any): the reference
    loop, one training batch (gradcheck uses its first ``GRADCHECK_ROWS`` rows), the data."""
    rows = bench.loop.batch_size
    return Case(model=bench.model, loss_fn=bench.loss_fn, optimizer=bench.optimizer,
                train=lambda after_step: train(bench, after_step=after_step),
                inputs=bench.train_x[:rows], targets=bench.train_y[:rows],
                gradcheck_rows=GRADCHECK_ROWS,
                data={"train_x": bench.train_x, "train_y": bench.train_y,
                      "test_x": bench.test_x, "test_y": bench.test_y})


def run_bug(bug: Bug, bench: Bench) -> Outcome:
    """Plant ``bug`` in ``bench`` (a fresh one of ``bug.setup``), run its tool and judge.

    Afterwards nothing may stay patched (values and modes may differ: the tool may train);
    a leftover patch makes the verdict "error"."""
    def diagnose():
        with bug.planted(bench):
            return run_tool(bug.tool, bench_case(bench))

    before = snapshot(bench)
    outcome = _run(bug.name, bug.kind, bench, bug.tool, bug.expected, diagnose)
    if outcome.diagnosis is not None:
        outcome.verdict, outcome.found, hit = judge(bug, outcome.diagnosis)
        if hit is not None:
            outcome.code, outcome.message = hit.code, hit.message
    outcome.leftovers = changes(before, snapshot(bench), values=False)
    if outcome.leftovers:
        outcome.verdict = ERROR
        outcome.message = "still patched after the run: " + "; ".join(outcome.leftovers)
    return outcome


def run_control(tool: str, bench: Bench) -> Outcome:
    """Run ``tool`` on a healthy bench: clean unless a warning or error appears."""
    outcome = _run(f"healthy {bench.setup} ({tool})", "control", bench, tool, "clean",
                   lambda: run_tool(tool, bench_case(bench)))
    if outcome.diagnosis is not None:
        alarms = [f for f in outcome.diagnosis.findings if f.is_alarm]
        outcome.verdict = FALSE_ALARM if alarms else CLEAN
        if alarms:
            outcome.found, outcome.code = alarms[0].location or "-", alarms[0].code
            outcome.message = alarms[0].message
    return outcome


def _run(name, kind, bench, tool, expected, diagnose):
    run = guarded_run(diagnose)
    return Outcome(name=name, kind=kind, backend=bench.backend, tool=tool, setup=bench.setup,
                   codes=run.alarm_codes, found="-", expected=expected, verdict=ERROR,
                   seconds=run.seconds, message=run.error, warnings=list(run.warnings),
                   diagnosis=run.diagnosis)


def judge(bug: Bug, diagnosis: Diagnosis) -> tuple[str, str, Finding | None]:
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
