"""The tools a hunt runs, one name and one wrapper each, on a ``Case`` of either corpus.

Each wrapper runs one of gradhunt's diagnostics the way a user would and returns a
``Diagnosis``. The Monitor settings the hunt uses live here once (``MONITOR_SETTINGS``).
"""
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from diagnostics import Finding, Monitor, check_gradients, preflight, validate_data
from diagnostics.tools.batch_independence import check_batch_independence
from diagnostics.tools.label_checks import check_batch_label_order

from .case import Case

MONITOR_SETTINGS = {"every": 1, "window": 20}


@dataclass(frozen=True)
class Diagnosis:
    """What a tool said: its ``findings``, and for gradcheck the culprit's ``path`` and
    ``pattern`` kind per culprit module; ``report`` is the tool's own report (None for the
    tools that return findings only)."""

    tool: str
    findings: list[Finding]
    report: Any
    paths: dict[str, str] = field(default_factory=dict)      # culprit module -> gradient path
    patterns: dict[str, str | None] = field(default_factory=dict)  # culprit -> pattern kind


def run_tool(tool: str, case: Case) -> Diagnosis:
    """Run the tool called ``tool`` (a key of ``TOOLS``) on ``case``."""
    return TOOLS[tool](case)


def _gradcheck(case: Case) -> Diagnosis:
    rows = case.gradcheck_rows
    inputs, targets = ((case.inputs, case.targets) if rows is None
                       else (case.inputs[:rows], case.targets[:rows]))
    report = check_gradients(case.model, case.loss_fn, inputs, targets)
    paths, patterns = {}, {}
    for cause in report.causes:
        paths.setdefault(cause.module, cause.path)
        patterns.setdefault(cause.module, None if cause.pattern is None else cause.pattern.kind)
    return Diagnosis("gradcheck", list(report.findings), report, paths, patterns)


def _monitor(case: Case) -> Diagnosis:
    with Monitor(case.model, case.optimizer, scaler=case.scaler,
                 **MONITOR_SETTINGS) as monitor:
        case.train(monitor.step)
    report = monitor.report()
    return Diagnosis("monitor", list(report.findings), report)


def _preflight(case: Case) -> Diagnosis:
    report = preflight(case.model, case.loss_fn, case.inputs, case.targets,
                       optimizer=case.optimizer, causal=case.causal)
    return Diagnosis("preflight", list(report.findings), report)


def _validate_data(case: Case) -> Diagnosis:
    report = validate_data(**case.data)
    return Diagnosis("validate_data", list(report.findings), report)


def _batch_independence(case: Case) -> Diagnosis:
    findings = check_batch_independence(case.model, case.inputs, causal=case.causal)
    return Diagnosis("batch_independence", list(findings), None)


def _label_order(case: Case) -> Diagnosis:
    return Diagnosis("label_order", list(check_batch_label_order(case.label_batches)), None)


TOOLS: dict[str, Callable[[Case], Diagnosis]] = {
    "gradcheck": _gradcheck, "monitor": _monitor, "preflight": _preflight,
    "validate_data": _validate_data, "batch_independence": _batch_independence,
    "label_order": _label_order}
