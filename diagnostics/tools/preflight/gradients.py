"""The gradient check: analytic against numerical gradients in float64, on a small slice of
the batch (``diagnostics.gradcheck``)."""
from __future__ import annotations

from ...batch import Batch
from ...errors import DiagnosticsError
from ...gradcheck.check import run_check
from ...gradcheck.report_text import headline as gradient_headline
from ...gradcheck.settings import Settings as GradientSettings
from .context import Run
from .report import FAIL, PASS, SKIP, Outcome

GRADCHECK_ROWS = 4        # the slice of the batch the gradient check uses


def gradient_check(run: Run) -> Outcome:
    rows = min(GRADCHECK_ROWS, run.batch.batch_size)
    part = run.batch.rows(rows)
    try:
        batch = Batch.prepare(run.backend, run.batch.loss_fn, part.inputs, part.targets,
                              output=part.selector, float64=True, targets_required=False)
        report = run_check(run.backend, batch, GradientSettings())
    except DiagnosticsError as error:   # raised by the user's code (its cause) fails the item
        return Outcome(FAIL if error.__cause__ is not None else SKIP, f"not checked: {error}")
    return Outcome(PASS if report.passed else FAIL,
                   f"{gradient_headline(report)} (first {rows} rows)", tuple(report.findings))
