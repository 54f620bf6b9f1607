"""``CheckResult``: the findings of a one-shot check, as a list with a verdict and a text.

``check_batch_independence``, the label checks and ``check_step_equivalence`` return one. It
is a list of ``Finding``s (so ``result == []``, indexing and ``findings.extend(result)`` keep
working) that also says ``passed`` and prints like the other tools' reports. A check that
measured something on a healthy run says what in ``note`` (and its numbers in ``evidence``)
instead of an info finding: a finding filtered by its code then always means the problem.
"""
from ..jsonable import to_jsonable


class CheckResult(list):
    """``findings`` (the list itself), ``passed`` (no warning or error), ``note`` (what a
    passing check measured, in words; ``""`` when it has nothing to add), ``evidence`` (its
    numbers) and ``str()``."""

    def __init__(self, findings=(), *, check, note="", evidence=None):
        super().__init__(findings)
        self.check = check
        self.note = note
        self.evidence = dict(evidence or {})

    @property
    def findings(self):
        return list(self)

    @property
    def passed(self):
        return not any(f.is_alarm for f in self)

    def to_dict(self):
        return to_jsonable({"check": self.check, "passed": self.passed, "note": self.note,
                            "evidence": self.evidence,
                            "findings": [finding.to_dict() for finding in self]})

    def __str__(self):
        head = f"{self.check}: {'PASSED' if self.passed else 'FAILED'}"
        lines = [f"{head}: {self.note}" if self.note else head]
        lines += [f"  {line}" for finding in self for line in str(finding).splitlines()]
        if not self and not self.note:
            lines.append("  no findings")
        return "\n".join(lines)

    def __repr__(self):
        note = f", note={self.note!r}" if self.note else ""
        return f"CheckResult({list(self)!r}, check={self.check!r}{note})"
