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
import importlib
import sys

# The modules' paths before the split into sub-packages stay importable
# (``bug_injection.bench``, ``from bug_injection import formulas``): each old name is the moved
# module itself, so a patch or an isinstance check through either path sees one object.
_MOVED = {"bench": "reference", "models": "reference", "gpt": "reference", "text": "reference",
          "catalog": "planted", "gradient": "planted", "transformer": "planted",
          "formulas": "planted", "functions": "planted", "patching": "planted",
          "state": "planted", "distributed": "planted"}
for _name, _package in _MOVED.items():
    _module = importlib.import_module(f"{__name__}.{_package}.{_name}")
    sys.modules[f"{__name__}.{_name}"] = _module
    globals()[_name] = _module

from .planted.catalog import Bug, catalog, get_bug  # noqa: E402  (after the aliases: catalog()
from .reference.bench import Bench, Loop, make_bench  # noqa: E402  is the function here)

__all__ = ["Bug", "catalog", "get_bug", "Bench", "Loop", "make_bench"]
