"""Run one corpus entry's twin, built in one backend, through its tool; say what it found.

The verdict of a buggy twin: ``"diagnosed"`` when a warning or error carries one of the
entry's codes, ``"symptom"`` when only other warnings or errors appear, ``"missed"`` when
none appears. A fixed twin is ``"clean"`` when no warning or error appears.
"""
import contextlib
from dataclasses import dataclass, field

from diagnostics import Finding
from diagnostics.backends import torch_threads

from ..hunt.runner import guarded_run
from ..tools import run_tool
from .entry import Entry


@dataclass
class Run:
    """One twin in one backend through one tool: the findings, the alarm codes, the verdict."""

    entry: Entry
    twin: str                    # "buggy" or "fixed"
    backend: str                 # "torch" or "minigrad"
    verdict: str                 # diagnosed / symptom / missed, or clean / false alarm / error
    codes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    message: str = ""
    seconds: float = 0.0


def run_entry(entry: Entry, twin: str = "buggy", backend: str = "torch") -> Run:
    """Build ``entry``'s ``twin`` (``"buggy"`` or ``"fixed"``) in ``backend`` (``"torch"`` or
    ``"minigrad"``, one of ``entry.backends``), run its tool, judge."""
    if twin not in ("buggy", "fixed"):
        raise ValueError(f"twin: expected 'buggy' or 'fixed', got {twin!r}")
    if backend not in entry.backends:
        raise ValueError(f"backend: {entry.name} is reproduced on {', '.join(entry.backends)}, "
                         f"got {backend!r}")
    threads = torch_threads(1) if backend == "torch" else contextlib.nullcontext()
    with threads:
        run = guarded_run(lambda: run_tool(entry.tool, entry.build(twin, backend)))
    if run.diagnosis is None:
        return Run(entry, twin, backend, "error", message=run.error, seconds=run.seconds)
    findings, codes = run.diagnosis.findings, run.alarm_codes
    if twin == "fixed":
        verdict = "false alarm" if codes else "clean"
    elif any(f.code in entry.codes and f.is_alarm
             and entry.location in (None, f.location) for f in findings):
        verdict = "diagnosed"
    else:
        verdict = "symptom" if codes else "missed"
    return Run(entry, twin, backend, verdict, codes, findings, seconds=run.seconds)
