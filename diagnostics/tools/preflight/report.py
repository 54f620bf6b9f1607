"""What the checklist hands back: one ``CheckItem`` per line, the ``PreflightReport``, and the
``Outcome`` an item's check returns (the runner stamps the item's name on it)."""
from __future__ import annotations

import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...findings import Finding
from ...jsonable import to_jsonable
from ...monitor.layout import display_name

if TYPE_CHECKING:
    from .facts import Facts

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
WIDTH = 96          # the text's width, as the Monitor's report wraps its findings
FINDING_INDENT = 8  # a finding under its row; its words and its fix 4 further in


@dataclass
class CheckItem:
    """One line of the checklist."""

    name: str
    status: str
    summary: str
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict:
        return to_jsonable({"name": self.name, "status": self.status, "summary": self.summary,
                            "findings": [finding.to_dict() for finding in self.findings]})


@dataclass
class PreflightReport:
    """The checklist: ``items`` in order; ``passed`` when none FAILed; all ``findings``."""

    items: list[CheckItem]
    model: str

    @property
    def passed(self) -> bool:
        return all(item.status != FAIL for item in self.items)

    @property
    def findings(self) -> list[Finding]:
        return [finding for item in self.items for finding in item.findings]

    @property
    def verdict(self) -> str:
        """``all 12 checks passed``, or ``11 passed, 1 skipped (stale gradients: give
        train_step to check your loop)``, or ``2 of 12 FAILED, ...``: a skipped item is
        not a passed one."""
        counts = {status: sum(item.status == status for item in self.items)
                  for status in (PASS, FAIL, SKIP)}
        skipped = [item for item in self.items if item.status == SKIP]
        if not counts[FAIL] and not skipped:
            return f"all {len(self.items)} checks passed"
        parts = [f"{counts[FAIL]} of {len(self.items)} FAILED"] if counts[FAIL] else []
        parts.append(f"{counts[PASS]} passed")
        if skipped:
            reasons = "; ".join(f"{item.name}: {item.summary}" for item in skipped)
            parts.append(f"{len(skipped)} skipped ({reasons})")
        return ", ".join(parts)

    def item(self, name: str) -> CheckItem:
        return next(item for item in self.items if item.name == name)

    def to_dict(self) -> dict:
        return to_jsonable({"passed": self.passed, "model": self.model,
                            "items": [item.to_dict() for item in self.items]})

    def __str__(self) -> str:
        lines = [f"preflight: {self.verdict} ({self.model})"]
        width = max(len(item.name) for item in self.items)
        for item in self.items:
            head = f"  {item.status}  {item.name:<{width}}  "
            lines += _wrapped(item.summary, head, " " * len(head)) or [head.rstrip()]
            lines.extend(line for finding in item.findings for line in finding_lines(finding))
        return "\n".join(lines)


@dataclass(frozen=True)
class Outcome:
    """What one item's check found: a status, a line of summary, its findings and, for an item
    that learns something later items need, ``facts``: the facts as they stand after it (None:
    unchanged). Nameless: the runner knows which row of the table it ran."""

    status: str
    summary: str
    findings: tuple[Finding, ...] = ()
    facts: Facts | None = None

    def named(self, name: str) -> CheckItem:
        return CheckItem(name, self.status, self.summary, list(self.findings))


def passed(summary: str, findings: Iterable[Finding] = (), *,
           facts: Facts | None = None) -> Outcome:
    return Outcome(PASS, summary, tuple(findings), facts=facts)


def skipped(reason: str, findings: Iterable[Finding] = (), *,
            facts: Facts | None = None) -> Outcome:
    return Outcome(SKIP, reason, tuple(findings), facts=facts)


def failed(summary: str, findings: Iterable[Finding] = (), *,
           facts: Facts | None = None) -> Outcome:
    return Outcome(FAIL, summary, tuple(findings), facts=facts)


def judged(summary: str, findings: Iterable[Finding], *, facts: Facts | None = None) -> Outcome:
    """FAIL when a finding is an alarm (a warning or an error), else PASS."""
    findings = tuple(findings)
    return Outcome(status_of(findings), summary, findings, facts=facts)


def status_of(findings: Iterable[Finding]) -> str:
    return FAIL if any(finding.is_alarm for finding in findings) else PASS


def failing(summary: str, *, code: str, location: str | None, facts: Facts | None = None):
    """A function that makes a FAIL outcome with one ``code`` finding."""
    def fail(*, message, suggestion, evidence, severity="error") -> Outcome:
        finding = Finding(code, severity, location, message, suggestion, evidence)
        return Outcome(FAIL, summary, (finding,), facts=facts)
    return fail


def finding_lines(finding: Finding, indent: int = FINDING_INDENT) -> list[str]:
    """A finding as the Monitor's report prints one: ``[severity] CODE at location``, then its
    message and its fix (``try: ...``), wrapped and indented under it, so that a row's finding
    reads in full in a terminal without its ``findings`` opened."""
    pad, inner = " " * indent, " " * (indent + 4)
    where = f" at {display_name(finding.location)}" if finding.location is not None else ""
    follows = f", follows from {finding.follows_from}" if finding.follows_from else ""
    lines = [f"{pad}[{finding.severity}] {finding.code}{where}{follows}"]
    lines += _wrapped(finding.message, inner, inner)
    if finding.suggestion:
        lines += _wrapped(finding.suggestion, f"{inner}try: ", inner + " " * 5)
    return lines


def _wrapped(text: str, first: str, rest: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False)


def first_line(finding: Finding) -> str:
    """``CODE at location`` (or ``CODE``): a finding in an item's one-line summary."""
    return f"{finding.code} at {finding.location}" if finding.location else finding.code


def first_line_of(error: BaseException) -> str:
    """The first line of an exception's message: quoted in an item's summary."""
    text = str(error).strip().splitlines()
    return text[0] if text else ""
