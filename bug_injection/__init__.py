"""Bugs planted in reference models and bugs from the real world, and the hunt that checks
gradhunt finds them.

- ``reference/``: the reference models, data and loop a planted bug goes into (``Bench``).
- ``planted/``: the catalogue of plantable bugs and the code that plants and removes them.
- ``real_world/``: real-world silent bugs, each a sourced reproduction with a fixed twin.
- ``tools.py`` and ``case.py``: the one tool table both corpora name, and the ``Case`` it runs.
- ``hunt/``: one engine and one table for both corpora (``gradhunt hunt`` / ``inject``).

``catalog()`` lists the planted bugs; ``bug.planted(make_bench(bug.setup, backend))`` plants one
for a ``with`` block; ``bug_injection.hunt.hunt()`` plants each in turn and checks that
gradhunt's diagnostics find it.
"""
from .planted.catalog import Bug, catalog, get_bug
from .reference.bench import Bench, Loop, make_bench

__all__ = ["Bug", "catalog", "get_bug", "Bench", "Loop", "make_bench"]
