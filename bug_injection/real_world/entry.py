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

``backends`` lists the frameworks the reproduction is built in (``buggy(framework)`` and
``fixed(framework)``): torch always, minigrad where minigrad has the layers and the tool runs on
it. Either status is one string that holds on every backend, or a dict ``{backend: status}``
when the backends differ, so a backend where gradhunt falls short stays on record.
"""
from dataclasses import dataclass
from typing import Callable

CATEGORIES = ("data pipeline", "model definition", "loss", "optimizer and scheduler",
              "training loop", "evaluation passes", "custom autograd", "mixed precision")
TOOLS = ("monitor", "preflight", "check_gradients", "validate_data", "batch_independence",
         "label_order")
STATUSES = ("diagnosed", "symptom", "missed")
BACKENDS = ("torch", "minigrad")


@dataclass(frozen=True, kw_only=True)
class Entry:
    """A corpus entry; ``buggy(framework)``/``fixed(framework)`` build fresh ``Case``s."""

    name: str
    source: str            # repository and issue/PR number, or the URL, exactly as read
    category: str
    root_cause: str        # one sentence, in the user's words
    buggy: Callable
    fixed: Callable
    tool: str              # the tool run on both twins
    codes: tuple           # the finding codes that name the root cause (empty: none exists)
    expected: str          # the finding that names it, in words (with the tool)
    status: str | dict
    fixed_status: str | dict = "clean"
    location: str | None = None    # where the naming finding must point, when one place is right
    backends: tuple = ("torch",)

    def __post_init__(self):
        if self.category not in CATEGORIES:
            raise ValueError(f"Entry.category: expected one of {CATEGORIES}, "
                             f"got {self.category!r}")
        if self.tool not in TOOLS:
            raise ValueError(f"Entry.tool: expected one of {TOOLS}, got {self.tool!r}")
        if "torch" not in self.backends or not set(self.backends) <= set(BACKENDS):
            raise ValueError(f"Entry.backends: expected torch and optionally minigrad, "
                             f"got {self.backends!r}")
        for field_name in ("status", "fixed_status"):
            value = getattr(self, field_name)
            if isinstance(value, dict) and set(value) != set(self.backends):
                raise ValueError(f"Entry.{field_name}: a dict needs one status per backend "
                                 f"{self.backends}, got {sorted(value)}")
        for backend in self.backends:
            if self.verdict(backend) not in STATUSES:
                raise ValueError(f"Entry.status: expected it to start with one of {STATUSES}, "
                                 f"got {self.status_on(backend)!r}")
            if self.fixed_verdict(backend) not in ("clean", "false alarm"):
                raise ValueError(f"Entry.fixed_status: expected 'clean' or 'false alarm: "
                                 f"...', got {self.fixed_status_on(backend)!r}")
            if self.verdict(backend) == "diagnosed" and not self.codes:
                raise ValueError(f"{self.name}: 'diagnosed' needs the codes that name the "
                                 f"cause")

    def build(self, twin, backend="torch"):
        """A fresh ``Case`` of the ``twin`` (``"buggy"`` or ``"fixed"``) in ``backend``."""
        if twin not in ("buggy", "fixed"):
            raise ValueError(f"twin: expected 'buggy' or 'fixed', got {twin!r}")
        if backend not in self.backends:
            raise ValueError(f"backend: {self.name} is reproduced on {self.backends}, "
                             f"got {backend!r}")
        return getattr(self, twin)(backend)

    def status_on(self, backend="torch"):
        """The recorded status of the buggy version on ``backend``."""
        return self.status[backend] if isinstance(self.status, dict) else self.status

    def fixed_status_on(self, backend="torch"):
        """The recorded status of the fixed twin on ``backend``."""
        return (self.fixed_status[backend] if isinstance(self.fixed_status, dict)
                else self.fixed_status)

    def verdict(self, backend="torch"):
        """``"diagnosed"``, ``"symptom"`` or ``"missed"``: the status before any colon."""
        return self.status_on(backend).split(":", 1)[0].strip()

    def fixed_verdict(self, backend="torch"):
        """``"clean"`` or ``"false alarm"``: the fixed status before any colon."""
        return self.fixed_status_on(backend).split(":", 1)[0].strip()

    def symptom_codes(self, backend="torch"):
        """The codes a ``"symptom: A, B (...)"`` status lists."""
        return _codes(self.status_on(backend)) if self.verdict(backend) == "symptom" else ()

    def false_alarm_codes(self, backend="torch"):
        """The codes a ``"false alarm: A, B (...)"`` fixed status lists."""
        return (_codes(self.fixed_status_on(backend))
                if self.fixed_verdict(backend) == "false alarm" else ())


def _codes(status):
    text = status.split(":", 1)[1].split("(", 1)[0]
    return tuple(code.strip() for code in text.split(",") if code.strip())
