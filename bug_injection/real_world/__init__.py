"""Real-world silent training bugs, each from a public source, with a torch reproduction (and a
minigrad one where minigrad has the layers), its fixed twin, the finding that names it, and its
current status in gradhunt on each backend.

``corpus()`` lists the entries; ``run_entry(entry, "buggy" | "fixed", backend)`` runs one twin
through its tool; ``hunt_real_world()`` runs them all and scores them (``gradhunt hunt``).
"""
from .corpus import corpus, get_entry
from .entry import CATEGORIES, CLEAN, DIAGNOSED, Entry, Status, false_alarm, missed, symptom
from .run import Run, run_entry

__all__ = ["CATEGORIES", "CLEAN", "DIAGNOSED", "Entry", "Run", "Status", "corpus", "false_alarm",
           "get_entry", "missed", "run_entry", "symptom"]
