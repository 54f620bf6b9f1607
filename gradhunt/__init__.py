"""gradhunt: find the bugs in neural-network code that never raise an error.

The import name users type. It re-exports the public API of ``diagnostics`` (the same
objects, not copies), so ``gradhunt.Monitor is diagnostics.Monitor``; the training-framework
callbacks are in ``gradhunt.integrations``.
"""
from diagnostics import (CheckResult, DiagnosticsError, Finding, GradientReport, Monitor,
                         MonitorReport, check_batch_independence, check_batch_label_order,
                         check_gradients, check_label_range, compare_gradients, find_lr,
                         overfit_one_batch, preflight, revive_dead_units, validate_data)

__all__ = ["check_gradients", "compare_gradients", "GradientReport", "Monitor", "MonitorReport",
           "preflight", "overfit_one_batch", "find_lr", "revive_dead_units", "validate_data",
           "check_batch_independence", "check_label_range", "check_batch_label_order",
           "CheckResult", "Finding", "DiagnosticsError"]
