"""The real-world part of ``gradhunt hunt``: every corpus entry, buggy and fixed, on every
backend it is reproduced on (torch, and minigrad where minigrad has the layers), scored.

An (entry, backend) pair passes when what gradhunt says about its buggy twin matches the status
recorded for that backend (diagnosed / symptom / missed) and its fixed twin matches its
recorded fixed status (clean, or a recorded false alarm). The score counts the pairs diagnosed
at their root cause and the fixed twins that are clean, so a check that starts diagnosing an
entry, or a false alarm that goes away, shows as a changed status to record.
"""
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial

from ..hunt import table
from ..hunt.runner import run_all
from .corpus import corpus
from .entry import BACKENDS, Entry
from .run import Run, run_entry

HEADERS = ("real-world bug", "backend", "category", "tool", "found", "status", "fixed twin",
           "check")


@dataclass
class RealWorldOutcome:
    """One entry on one backend: its buggy and its fixed twin's runs."""

    entry: Entry
    buggy: Run
    fixed: Run

    @property
    def backend(self) -> str:
        return self.buggy.backend

    @property
    def ok(self) -> bool:
        """The buggy twin matches the status recorded for its backend, the fixed twin its
        fixed status."""
        entry, backend = self.entry, self.backend
        return (self.buggy.verdict == entry.verdict(backend)
                and set(entry.symptom_codes(backend)) <= set(self.buggy.codes)
                and self.fixed.verdict == entry.fixed_verdict(backend)
                and set(entry.false_alarm_codes(backend)) <= set(self.fixed.codes))

    def row(self) -> tuple[str, ...]:
        """This pair's row of the real-world table."""
        return (self.entry.name, self.backend, self.entry.category, self.entry.tool,
                ", ".join(self.buggy.codes) or "-", self.buggy.verdict, self.fixed.verdict,
                "ok" if self.ok else "CHANGED")

    def to_dict(self) -> dict:
        return {"name": self.entry.name, "backend": self.backend, "source": self.entry.source,
                "category": self.entry.category, "tool": self.entry.tool,
                "expected": self.entry.expected,
                "recorded": self.entry.status_on(self.backend),
                "result": self.buggy.verdict, "codes": self.buggy.codes,
                "fixed_recorded": self.entry.fixed_status_on(self.backend),
                "fixed": self.fixed.verdict,
                "fixed_codes": self.fixed.codes, "ok": self.ok,
                "message": self.buggy.message or self.fixed.message,
                "seconds": round(self.buggy.seconds + self.fixed.seconds, 3)}


@dataclass
class RealWorldResult:
    """Every (entry, backend) pair's outcome; ``passed`` when each matches its record."""

    outcomes: list[RealWorldOutcome]
    seconds: float
    headers = HEADERS

    @property
    def passed(self) -> bool:
        return all(o.ok for o in self.outcomes)

    def runs(self) -> str:
        """How many (entry, backend) pairs ran, in words: per backend and their entries."""
        per_backend: dict[str, int] = {}
        for outcome in self.outcomes:
            per_backend[outcome.backend] = per_backend.get(outcome.backend, 0) + 1
        entries = len({o.entry.name for o in self.outcomes})
        return ", ".join([f"{entries} entries", *(f"{n} on {backend}" for backend, n
                                                  in per_backend.items())])

    def sections(self) -> list[list[tuple[str, ...]]]:
        return [[o.row() for o in self.outcomes]]

    def notes(self) -> list[str]:
        """A line for each pair that differs from its recorded status."""
        return [f"CHANGED: {o.entry.name} on {o.backend}: recorded "
                f"'{o.entry.status_on(o.backend)}' / fixed "
                f"'{o.entry.fixed_status_on(o.backend)}', now {o.buggy.verdict} "
                f"{o.buggy.codes} / fixed "
                f"{o.fixed.verdict} {o.fixed.codes}"
                + (f" ({o.buggy.message or o.fixed.message})"
                   if o.buggy.message or o.fixed.message else "")
                for o in self.outcomes if not o.ok]

    def score(self) -> str:
        total = len(self.outcomes)
        diagnosed = sum(o.buggy.verdict == "diagnosed" for o in self.outcomes)
        symptom = sum(o.buggy.verdict == "symptom" for o in self.outcomes)
        clean = sum(o.fixed.verdict == "clean" for o in self.outcomes)
        changed = sum(not o.ok for o in self.outcomes)
        return (f"real-world: {diagnosed}/{total} diagnosed at root cause, {symptom} only a "
                f"symptom, {total - diagnosed - symptom} missed; {clean}/{total} fixed twins "
                f"clean; {changed} differ from the recorded status ({self.runs()}), "
                f"in {self.seconds:.1f} s")

    def to_dict(self) -> dict:
        return {"passed": self.passed, "seconds": round(self.seconds, 2),
                "diagnosed": sum(o.buggy.verdict == "diagnosed" for o in self.outcomes),
                "entries": len({o.entry.name for o in self.outcomes}),
                "runs": len(self.outcomes),
                "fixed_clean": sum(o.fixed.verdict == "clean" for o in self.outcomes),
                "outcomes": [o.to_dict() for o in self.outcomes]}


def hunt_real_world(*, names: Iterable[str] | None = None, backends: Sequence[str] = BACKENDS,
                    progress: Callable[[int, int, RealWorldOutcome], None] | None = None,
                    ) -> RealWorldResult:
    """Run the corpus (or the entries called ``names``) on each of ``backends`` it is
    reproduced on; ``progress(done, total, outcome)``."""
    unknown_backends = set(backends) - set(BACKENDS)
    if unknown_backends:
        raise ValueError(f"backends: expected some of {BACKENDS}, got {sorted(unknown_backends)}")
    entries = corpus() if names is None else [e for e in corpus() if e.name in set(names)]
    unknown = set(names or ()) - {e.name for e in entries}
    if unknown:
        raise KeyError(f"no real-world entry called {', '.join(sorted(unknown))}")
    jobs = [partial(run_pair, entry, backend) for entry in entries for backend in entry.backends
            if backend in backends]
    outcomes, seconds = run_all(jobs, backends=backends, progress=progress)
    return RealWorldResult(outcomes, seconds)


def run_pair(entry: Entry, backend: str) -> RealWorldOutcome:
    """Both twins of ``entry`` on ``backend``."""
    return RealWorldOutcome(entry, run_entry(entry, "buggy", backend),
                            run_entry(entry, "fixed", backend))


def render(result: RealWorldResult) -> str:
    """The real-world table and its score line."""
    return table.render(result)


def render_entry(entry: Entry, buggy: Run, fixed: Run) -> str:
    """One entry on one backend (its runs'), step by step, for ``gradhunt inject NAME``."""
    def findings(run):
        shown = [f for f in run.findings if f.is_alarm]
        text = [f"     {line}" for f in shown for line in str(f).splitlines()]
        return text or [f"     (no warning or error){': ' + run.message if run.message else ''}"]

    return "\n".join([
        f"gradhunt inject {entry.name}  (real-world, {entry.category}, on {buggy.backend})",
        "",
        f"1. Source:      {entry.source}",
        f"   Root cause:  {entry.root_cause}", "",
        f"2. The buggy version through {entry.tool} ({buggy.seconds:.2f} s): {buggy.verdict}",
        *findings(buggy), "",
        f"3. The fixed twin through {entry.tool} ({fixed.seconds:.2f} s): {fixed.verdict}",
        *findings(fixed), "",
        f"4. Expected: {entry.expected}",
        f"   Recorded:  {entry.status_on(buggy.backend)}  |  fixed twin: "
        f"{entry.fixed_status_on(buggy.backend)}",
        f"   Now:       {buggy.verdict}  |  fixed twin: {fixed.verdict}"])
