"""``CheckResult``: the findings of a one-shot check, as a list with a verdict and a text.

``check_batch_independence`` and the label checks return one. It is a list of ``Finding``s
(so ``result == []``, indexing and ``findings.extend(result)`` keep working) that also says
``passed`` and prints like the other tools' reports.
"""
from ..jsonable import to_jsonable


class CheckResult(list):
    """``findings`` (the list itself), ``passed`` (no warning or error) and ``str()``."""

    def __init__(self, findings=(), *, check):
        super().__init__(findings)
        self.check = check

    @property
    def findings(self):
        return list(self)

    @property
    def passed(self):
        return not any(f.is_alarm for f in self)

    def to_dict(self):
        return to_jsonable({"check": self.check, "passed": self.passed,
                            "findings": [finding.to_dict() for finding in self]})

    def __str__(self):
        lines = [f"{self.check}: {'PASSED' if self.passed else 'FAILED'}"]
        lines += [f"  {line}" for finding in self for line in str(finding).splitlines()]
        if not self:
            lines.append("  no findings")
        return "\n".join(lines)

    def __repr__(self):
        return f"CheckResult({list(self)!r}, check={self.check!r})"
