"""Training tools.

Overfit one batch, LR range test, preflight checklist, dead-unit revival, data validation,
batch independence and label checks, step equivalence.
"""
from .batch_independence import check_batch_independence
from .check_result import CheckResult
from .data_validation import DataReport, validate_data
from .label_checks import check_batch_label_order, check_label_range
from .lr_finder import LRFinderResult, find_lr
from .overfit import OverfitResult, overfit_one_batch
from .preflight import CheckItem, PreflightReport, preflight
from .revive import RevivalReport, revive_dead_units
from .step_equivalence import check_step_equivalence

__all__ = ["OverfitResult", "overfit_one_batch", "LRFinderResult", "find_lr", "RevivalReport",
           "revive_dead_units", "DataReport", "validate_data", "PreflightReport", "CheckItem",
           "preflight", "check_batch_independence", "check_label_range",
           "check_batch_label_order", "check_step_equivalence", "CheckResult"]
