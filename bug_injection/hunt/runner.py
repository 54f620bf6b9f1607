"""The hunt's engine, shared by both corpora: one guarded, timed tool run, and the loop over
the runs with one torch thread and a progress callback."""
import contextlib
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from diagnostics.backends import torch_threads

from ..tools import Diagnosis

Result = TypeVar("Result")


@dataclass(frozen=True)
class ToolRun:
    """One tool run: its ``diagnosis`` (None when it raised; ``error`` says what), the codes of
    its warnings and errors in report order, the Python warnings raised, the time taken."""

    diagnosis: Diagnosis | None
    error: str
    seconds: float
    warnings: tuple[str, ...]

    @property
    def alarm_codes(self) -> list[str]:
        if self.diagnosis is None:
            return []
        return list(dict.fromkeys(f.code for f in self.diagnosis.findings if f.is_alarm))


def guarded_run(diagnose: Callable[[], Diagnosis]) -> ToolRun:
    """Run ``diagnose()``, recording its warnings; a crash is this run's verdict, never the
    hunt's end."""
    start = time.perf_counter()
    diagnosis, error = None, ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            diagnosis = diagnose()
        except Exception as exc:  # reported as this run's verdict, the hunt goes on
            error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - start
    raised = tuple(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))
    return ToolRun(diagnosis, error, seconds, raised)


def run_all(jobs: Sequence[Callable[[], Result]], *, backends: Sequence[str],
            progress: Callable[[int, int, Result], None] | None = None,
            ) -> tuple[list[Result], float]:
    """Every job in order, with one torch thread; ``progress(done, total, result)`` after each.
    Returns the results and the seconds taken."""
    start = time.perf_counter()
    results: list[Result] = []
    with single_threaded_torch(backends):
        for job in jobs:
            results.append(job())
            if progress is not None:
                progress(len(results), len(jobs), results[-1])
    return results, time.perf_counter() - start


def single_threaded_torch(backends: Sequence[str]) -> contextlib.AbstractContextManager:
    """One torch thread while the hunt runs (its models are tiny), the old count afterwards."""
    return torch_threads(1) if "torch" in backends else contextlib.nullcontext()

