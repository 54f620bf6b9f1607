"""The real-world part of ``gradhunt hunt``: every corpus entry, buggy and fixed, on every
backend it is reproduced on (torch, and minigrad where minigrad has the layers), scored.

An (entry, backend) pair passes when what gradhunt says about its buggy twin matches the status
recorded for that backend (diagnosed / symptom / missed) and its fixed twin matches its
recorded fixed status (clean, or a recorded false alarm). The score counts the pairs diagnosed
at their root cause and the fixed twins that are clean, so a check that starts diagnosing an
entry, or a false alarm that goes away, shows as a changed status to record.
"""
import time
from dataclasses import dataclass

from .corpus import corpus
from .entry import BACKENDS
from .run import run_entry

HEADERS = ("real-world bug", "backend", "category", "tool", "found", "status", "fixed twin",
           "check")


@dataclass
class RealWorldOutcome:
    entry: object
    buggy: object        # Run
    fixed: object        # Run

    @property
    def backend(self):
        return self.buggy.backend

    @property
    def ok(self):
        """The buggy twin matches the status recorded for its backend, the fixed twin its
        fixed status."""
        entry, backend = self.entry, self.backend
        return (self.buggy.verdict == entry.verdict(backend)
                and set(entry.symptom_codes(backend)) <= set(self.buggy.codes)
                and self.fixed.verdict == entry.fixed_verdict(backend)
                and set(entry.false_alarm_codes(backend)) <= set(self.fixed.codes))

    def to_dict(self):
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
    outcomes: list
    seconds: float

    @property
    def passed(self):
        return all(o.ok for o in self.outcomes)

    def runs(self):
        """How many (entry, backend) pairs ran, in words: per backend and their entries."""
        per_backend = {}
        for outcome in self.outcomes:
            per_backend[outcome.backend] = per_backend.get(outcome.backend, 0) + 1
        entries = len({o.entry.name for o in self.outcomes})
        return ", ".join([f"{entries} entries", *(f"{n} on {backend}" for backend, n
                                                  in per_backend.items())])

    def score(self):
        total = len(self.outcomes)
        diagnosed = sum(o.buggy.verdict == "diagnosed" for o in self.outcomes)
        symptom = sum(o.buggy.verdict == "symptom" for o in self.outcomes)
        clean = sum(o.fixed.verdict == "clean" for o in self.outcomes)
        changed = sum(not o.ok for o in self.outcomes)
        return (f"real-world: {diagnosed}/{total} diagnosed at root cause, {symptom} only a "
                f"symptom, {total - diagnosed - symptom} missed; {clean}/{total} fixed twins "
                f"clean; {changed} differ from the recorded status ({self.runs()}), "
                f"in {self.seconds:.1f} s")

    def to_dict(self):
        return {"passed": self.passed, "seconds": round(self.seconds, 2),
                "diagnosed": sum(o.buggy.verdict == "diagnosed" for o in self.outcomes),
                "entries": len({o.entry.name for o in self.outcomes}),
                "runs": len(self.outcomes),
                "fixed_clean": sum(o.fixed.verdict == "clean" for o in self.outcomes),
                "outcomes": [o.to_dict() for o in self.outcomes]}


def hunt_real_world(*, names=None, backends=BACKENDS, progress=None):
    """Run the corpus (or the entries called ``names``) on each of ``backends`` it is
    reproduced on; ``progress(done, total, outcome)``."""
    unknown_backends = set(backends) - set(BACKENDS)
    if unknown_backends:
        raise ValueError(f"backends: expected some of {BACKENDS}, got {sorted(unknown_backends)}")
    entries = corpus() if names is None else [e for e in corpus() if e.name in set(names)]
    unknown = set(names or ()) - {e.name for e in entries}
    if unknown:
        raise KeyError(f"no real-world entry called {', '.join(sorted(unknown))}")
    pairs = [(entry, backend) for entry in entries for backend in entry.backends
             if backend in backends]
    start = time.perf_counter()
    outcomes = []
    for entry, backend in pairs:
        outcomes.append(RealWorldOutcome(entry, run_entry(entry, "buggy", backend),
                                         run_entry(entry, "fixed", backend)))
        if progress is not None:
            progress(len(outcomes), len(pairs), outcomes[-1])
    return RealWorldResult(outcomes, time.perf_counter() - start)


def render(result):
    """The real-world table and its score line."""
    rows = [(o.entry.name, o.backend, o.entry.category, o.entry.tool,
             ", ".join(o.buggy.codes) or "-",
             o.buggy.verdict, o.fixed.verdict, "ok" if o.ok else "CHANGED")
            for o in result.outcomes]
    widths = [max(len(str(r[i])) for r in [HEADERS, *rows]) for i in range(len(HEADERS))]

    def line(cells):
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()

    lines = [line(HEADERS), line(["-" * w for w in widths]), *(line(r) for r in rows)]
    changed = [o for o in result.outcomes if not o.ok]
    if changed:
        lines.append("")
        lines += [f"CHANGED: {o.entry.name} on {o.backend}: recorded "
                  f"'{o.entry.status_on(o.backend)}' / fixed "
                  f"'{o.entry.fixed_status_on(o.backend)}', now {o.buggy.verdict} "
                  f"{o.buggy.codes} / fixed "
                  f"{o.fixed.verdict} {o.fixed.codes}"
                  + (f" ({o.buggy.message or o.fixed.message})"
                     if o.buggy.message or o.fixed.message else "") for o in changed]
    lines += ["", result.score()]
    return "\n".join(lines)


def render_entry(entry, buggy, fixed):
    """One entry on one backend (its runs'), step by step, for ``gradhunt inject NAME``."""
    def findings(run):
        shown = [f for f in run.findings if f.severity in ("warning", "error")]
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
