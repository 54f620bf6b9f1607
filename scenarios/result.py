"""``ScenarioResult``: what a scenario showed (its log) and whether each of its checks held."""
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from diagnostics.jsonable import to_jsonable


@dataclass(frozen=True)
class Check:
    """One claim a scenario makes, whether it ``held``, and the numbers behind it."""

    claim: str
    held: bool
    detail: str = ""

    def __str__(self):
        text = f"[{'PASS' if self.held else 'FAIL'}] {self.claim}"
        return f"{text} ({self.detail})" if self.detail else text


@dataclass
class ScenarioResult:
    """A scenario's ``log`` (the reports it printed, in order), its ``checks`` and ``files``.

    ``passed`` holds when there is at least one check and every check held.
    """

    name: str
    title: str
    fast: bool
    log: list = field(default_factory=list)
    checks: list = field(default_factory=list)
    files: dict = field(default_factory=dict)
    seconds: float | None = None

    @property
    def passed(self):
        return bool(self.checks) and all(check.held for check in self.checks)

    @property
    def failed_checks(self):
        return [check for check in self.checks if not check.held]

    def say(self, text=""):
        """Add a paragraph (a report's ``str()``, a sentence) to the log."""
        self.log.append(str(text))

    def section(self, heading):
        self.log.append(f"--- {heading} ---")

    def check(self, claim, held, detail=""):
        """Record a claim and whether it held; returns ``held``."""
        self.checks.append(Check(claim, bool(held), detail))
        return bool(held)

    @contextmanager
    def timed(self):
        """Measure the scenario's run time into ``seconds``."""
        started = time.perf_counter()
        try:
            yield self
        finally:
            self.seconds = time.perf_counter() - started

    def to_dict(self):
        return to_jsonable({
            "name": self.name, "title": self.title, "fast": self.fast, "passed": self.passed,
            "seconds": self.seconds, "files": self.files, "log": self.log,
            "checks": [{"claim": c.claim, "held": c.held, "detail": c.detail}
                       for c in self.checks]})

    def __str__(self):
        settings = "fast settings" if self.fast else "full settings"
        lines = [f"=== scenario {self.name}: {self.title} ({settings}) ==="]
        lines += self.log
        if self.files:
            lines.append("--- files ---")
            lines += [f"{label}: {path}" for label, path in self.files.items()]
        lines.append("--- checks ---")
        lines += [str(check) for check in self.checks]
        held = sum(check.held for check in self.checks)
        timing = f" in {self.seconds:.1f} s" if self.seconds is not None else ""
        verdict = "PASSED" if self.passed else "FAILED"
        lines.append(f"scenario {self.name} {verdict}: {held} of {len(self.checks)} checks "
                     f"held{timing}")
        return "\n".join(lines)
