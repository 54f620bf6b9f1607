"""The catalogue of plantable bugs, and the code that plants and removes them.

``catalog()`` lists the bugs; ``bug.planted(make_bench(bug.setup, backend))`` plants one for a
``with`` block; ``bug_injection.hunt.hunt()`` plants each in turn and checks that gradhunt's
diagnostics find it.
"""
from .bench import Bench, Loop, make_bench
from .catalog import Bug, catalog, get_bug

__all__ = ["Bug", "catalog", "get_bug", "Bench", "Loop", "make_bench"]
