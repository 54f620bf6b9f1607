"""Training tools: overfit one batch, LR range test, preflight checklist, dead-unit revival, data validation."""
from .lr_finder import LRFinderResult, find_lr
from .overfit import OverfitResult, overfit_one_batch

__all__ = ["OverfitResult", "overfit_one_batch", "LRFinderResult", "find_lr"]
