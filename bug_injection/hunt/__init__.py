"""``gradhunt hunt``: both corpora through one engine (``runner``) and one table (``table``).

The catalogue part (``catalogue``: plant, run the tool, judge against the ground truth) is
re-exported here; the real-world part scores against recorded statuses
(``bug_injection.real_world.hunt``). Both run the tools of ``bug_injection.tools``.
"""
from .catalogue import (CLEAN, ERROR, FALSE_ALARM, FOUND, MISPLACED, MISSED, HuntResult,
                        Outcome, bench_case, hunt, judge, run_bug, run_control)
from .runner import single_threaded_torch
from .table import render

__all__ = ["CLEAN", "ERROR", "FALSE_ALARM", "FOUND", "MISPLACED", "MISSED",
           "HuntResult", "Outcome", "bench_case", "hunt", "judge", "render", "run_bug",
           "run_control", "single_threaded_torch"]
