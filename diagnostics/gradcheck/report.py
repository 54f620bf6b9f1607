"""``GradientReport``: what a gradient check found, as fields, a readable text and a dict."""
from dataclasses import dataclass, field

import numpy as np

from ..jsonable import to_jsonable
from .report_text import render

OK, MISMATCH, UNCHECKED = "ok", "mismatch", "unchecked"
NOT_DIFFERENTIATED = "not differentiated"   # no path from the parameter to the loss


@dataclass(frozen=True)
class TensorCheck:
    """The check of one gradient: a parameter's, or the one at a module's input or output.

    ``status``: "ok", "mismatch", "unchecked" (every probe landed on a non-differentiable
    point), or "not differentiated" (the forward uses the parameter under no_grad or detached:
    backward cannot reach it, so finite differences are not compared with it). ``directions``:
    random directions measured; ``kinks``: probes or elements left out
    at non-differentiable points. The ``worst_*`` fields describe the worst single element
    checked (``worst_index`` None when no element was checked one by one); otherwise
    ``numerical`` and ``analytical`` are the worst directional derivative's.
    """

    name: str
    shape: tuple
    status: str
    directions: int
    kinks: int
    max_rel_error: float
    elements_checked: int = 0
    elements_mismatched: int = 0
    worst_index: tuple | None = None
    numerical: float | None = None
    analytical: float | None = None
    pattern: object = None

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def to_dict(self):
        return to_jsonable({
            "name": self.name, "shape": self.shape, "status": self.status,
            "directions": self.directions, "kinks": self.kinks,
            "max_rel_error": self.max_rel_error, "elements_checked": self.elements_checked,
            "elements_mismatched": self.elements_mismatched, "worst_index": self.worst_index,
            "numerical": self.numerical, "analytical": self.analytical,
            "pattern": None if self.pattern is None else self.pattern.to_dict()})


@dataclass(frozen=True)
class Culprit:
    """A module (or "loss") where a right gradient turns wrong, on one path."""

    module: str
    module_type: str
    path: str
    check: TensorCheck            # the wrong gradient that shows it
    right: str | None             # the label of the right gradient next to it
    affected: tuple = ()          # faulty parameters downstream in backward order

    @property
    def pattern(self):
        return self.check.pattern

    @property
    def where(self):
        if self.module == "loss":
            return "the loss"
        if not self.module:
            return f"the model ({self.module_type})"
        return f"'{self.module}' ({self.module_type})"

    def to_dict(self):
        return to_jsonable({"module": self.module, "module_type": self.module_type,
                            "path": self.path, "right": self.right,
                            "affected": list(self.affected), "check": self.check.to_dict()})


@dataclass(frozen=True)
class GradientReport:
    """``passed``, ``faulty`` (parameters, worst first), ``culprits`` (module names, most likely
    first, "loss" for the loss), ``findings``; ``parameters`` and ``points`` hold every check;
    ``causes`` the culprits in detail."""

    passed: bool
    faulty: list
    culprits: list
    findings: list
    parameters: dict
    points: list
    causes: list
    forward_evaluations: int
    backward_passes: int
    backend: str
    mode: str
    notes: list = field(default_factory=list)

    def to_dict(self):
        return to_jsonable({
            "passed": self.passed, "faulty": self.faulty, "culprits": self.culprits,
            "findings": [f.to_dict() for f in self.findings],
            "parameters": {name: c.to_dict() for name, c in self.parameters.items()},
            "points": [c.to_dict() for c in self.points],
            "causes": [c.to_dict() for c in self.causes],
            "forward_evaluations": self.forward_evaluations,
            "backward_passes": self.backward_passes, "backend": self.backend,
            "mode": self.mode, "notes": self.notes})

    def __str__(self):
        return render(self)
