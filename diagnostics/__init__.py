"""gradhunt diagnostics: one layer that inspects minigrad and torch models alike."""
from .errors import DiagnosticsError
from .findings import Finding
from .gradcheck import GradientReport, check_gradients, compare_gradients
from .monitor import GuardStopped, Monitor, MonitorReport
from .tools import (CheckResult, check_batch_independence, check_batch_label_order,
                    check_label_range, check_step_equivalence, find_lr, overfit_one_batch,
                    preflight, revive_dead_units, validate_data)

__all__ = ["check_gradients", "compare_gradients", "GradientReport", "Monitor", "MonitorReport",
           "preflight", "overfit_one_batch", "find_lr", "revive_dead_units", "validate_data",
           "check_batch_independence", "check_label_range", "check_batch_label_order",
           "check_step_equivalence", "GuardStopped", "CheckResult", "Finding", "DiagnosticsError"]
