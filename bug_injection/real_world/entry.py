"""``Entry``: one real-world silent bug, its public source, its reproduction and its status.

``status`` records what the current gradhunt says about the buggy version, as data that later
work flips: ``"diagnosed"`` (a warning or error with one of ``codes`` appears), ``"symptom:
CODE, ..."`` (only other warnings or errors appear; the codes listed must be among them), or
``"missed: why"`` (no warning or error at all). With ``location`` set, a diagnosis counts only
when the finding points there (the module as ``named_modules()`` spells it).
``tests/bug_injection/test_real_world.py`` asserts that the recorded status is the true one.
``fixed_status`` records the same for the fixed twin: ``"clean"`` (no warning or error), or
``"false alarm: CODE, ... (why)"`` for a false alarm of the current gradhunt on the healthy
version, kept visible until it is fixed.
"""
from dataclasses import dataclass
from typing import Callable

CATEGORIES = ("data pipeline", "model definition", "loss", "optimizer and scheduler",
              "training loop", "evaluation passes", "custom autograd", "mixed precision")
TOOLS = ("monitor", "preflight", "check_gradients", "validate_data", "batch_independence",
         "label_order")
STATUSES = ("diagnosed", "symptom", "missed")


@dataclass(frozen=True, kw_only=True)
class Entry:
    """A corpus entry; ``buggy()``/``fixed()`` build fresh ``Case``s."""

    name: str
    source: str            # repository and issue/PR number, or the URL, exactly as read
    category: str
    root_cause: str        # one sentence, in the user's words
    buggy: Callable
    fixed: Callable
    tool: str              # the tool run on both twins
    codes: tuple           # the finding codes that name the root cause (empty: none exists)
    expected: str          # the finding that names it, in words (with the tool)
    status: str
    fixed_status: str = "clean"
    location: str | None = None    # where the naming finding must point, when one place is right

    def __post_init__(self):
        if self.category not in CATEGORIES:
            raise ValueError(f"Entry.category: expected one of {CATEGORIES}, "
                             f"got {self.category!r}")
        if self.tool not in TOOLS:
            raise ValueError(f"Entry.tool: expected one of {TOOLS}, got {self.tool!r}")
        if self.verdict not in STATUSES:
            raise ValueError(f"Entry.status: expected it to start with one of {STATUSES}, "
                             f"got {self.status!r}")
        if self.fixed_verdict not in ("clean", "false alarm"):
            raise ValueError(f"Entry.fixed_status: expected 'clean' or 'false alarm: ...', "
                             f"got {self.fixed_status!r}")
        if self.verdict == "diagnosed" and not self.codes:
            raise ValueError(f"{self.name}: 'diagnosed' needs the codes that name the cause")

    @property
    def verdict(self):
        """``"diagnosed"``, ``"symptom"`` or ``"missed"``: the status before any colon."""
        return self.status.split(":", 1)[0].strip()

    @property
    def fixed_verdict(self):
        """``"clean"`` or ``"false alarm"``: the fixed status before any colon."""
        return self.fixed_status.split(":", 1)[0].strip()

    @property
    def symptom_codes(self):
        """The codes a ``"symptom: A, B (...)"`` status lists."""
        return _codes(self.status) if self.verdict == "symptom" else ()

    @property
    def false_alarm_codes(self):
        """The codes a ``"false alarm: A, B (...)"`` fixed status lists."""
        return _codes(self.fixed_status) if self.fixed_verdict == "false alarm" else ()


def _codes(status):
    text = status.split(":", 1)[1].split("(", 1)[0]
    return tuple(code.strip() for code in text.split(",") if code.strip())
