"""``Entry``: one real-world silent bug, its public source, its reproduction and its status.

``status`` records what the current gradhunt says about the buggy version, as data that later
work flips: ``DIAGNOSED`` (a warning or error with one of ``codes`` appears), ``symptom(CODE,
..., why=...)`` (only other warnings or errors appear; the codes listed must be among them), or
``missed(why)`` (no warning or error at all). With ``location`` set, a diagnosis counts only
when the finding points there (the module as ``named_modules()`` spells it).
``tests/bug_injection/test_real_world.py`` asserts that the recorded status is the true one.
``fixed_status`` records the same for the fixed twin: ``CLEAN`` (no warning or error), or
``false_alarm(CODE, ..., why=...)`` for a false alarm of the current gradhunt on the healthy
version, kept visible until it is fixed.

``backends`` lists the frameworks the reproduction is built in (``reproduce(bug, framework)``):
torch always, minigrad where minigrad has the layers and the tool runs on it. Either status is
one ``Status`` that holds on every backend, or a dict ``{backend: Status}`` when the backends
differ, so a backend where gradhunt falls short stays on record.
"""
from collections.abc import Callable
from dataclasses import dataclass

from ..case import Case
from ..tools import TOOLS

CATEGORIES = ("data pipeline", "model definition", "loss", "optimizer and scheduler",
              "training loop", "evaluation passes", "custom autograd", "mixed precision")
STATUSES = ("diagnosed", "symptom", "missed")
FIXED_STATUSES = ("clean", "false alarm")
BACKENDS = ("torch", "minigrad")


@dataclass(frozen=True)
class Status:
    """A recorded verdict on one twin: one of ``STATUSES`` (buggy) or ``FIXED_STATUSES``
    (fixed), the codes a symptom or a false alarm must show, and why, in words."""

    verdict: str
    codes: tuple[str, ...] = ()
    why: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in STATUSES + FIXED_STATUSES:
            raise ValueError(f"Status.verdict: expected one of {STATUSES + FIXED_STATUSES}, "
                             f"got {self.verdict!r}")

    def __str__(self) -> str:
        """As the tables and docs show it: ``missed: why``, ``symptom: A, B (why)``."""
        detail = ", ".join(self.codes)
        if self.why:
            detail = f"{detail} ({self.why})" if detail else self.why
        return f"{self.verdict}: {detail}" if detail else self.verdict


DIAGNOSED = Status("diagnosed")
CLEAN = Status("clean")


def symptom(*codes: str, why: str = "") -> Status:
    """Only other warnings or errors appear; ``codes`` must be among them."""
    return Status("symptom", codes, why)


def missed(why: str) -> Status:
    """No warning or error appears on the buggy version."""
    return Status("missed", (), why)


def false_alarm(*codes: str, why: str = "") -> Status:
    """The fixed twin raises ``codes``: a false alarm kept on record until it is fixed."""
    return Status("false alarm", codes, why)


@dataclass(frozen=True, kw_only=True)
class Entry:
    """A corpus entry; ``reproduce(bug, framework)`` builds a fresh ``Case`` of the buggy
    (``bug=True``) or the fixed twin."""

    name: str
    source: str            # repository and issue/PR number, or the URL, exactly as read
    category: str
    root_cause: str        # one sentence, in the user's words
    reproduce: Callable[[bool, str], Case]   # (bug, framework) -> a fresh Case of one twin
    tool: str              # the tool run on both twins (a key of ``tools.TOOLS``)
    codes: tuple[str, ...]     # the finding codes that name the root cause (empty: none exists)
    expected: str          # the finding that names it, in words (with the tool)
    status: Status | dict[str, Status]
    fixed_status: Status | dict[str, Status] = CLEAN
    location: str | None = None    # where the naming finding must point, when one place is right
    backends: tuple[str, ...] = ("torch",)

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"Entry.category: expected one of {CATEGORIES}, "
                             f"got {self.category!r}")
        if self.tool not in TOOLS:
            raise ValueError(f"Entry.tool: expected one of {tuple(TOOLS)}, got {self.tool!r}")
        if "torch" not in self.backends or not set(self.backends) <= set(BACKENDS):
            raise ValueError(f"Entry.backends: expected torch and optionally minigrad, "
                             f"got {self.backends!r}")
        for field_name, allowed in (("status", STATUSES), ("fixed_status", FIXED_STATUSES)):
            value = getattr(self, field_name)
            if isinstance(value, dict) and set(value) != set(self.backends):
                raise ValueError(f"Entry.{field_name}: a dict needs one status per backend "
                                 f"{self.backends}, got {sorted(value)}")
            for status in (value.values() if isinstance(value, dict) else (value,)):
                if not isinstance(status, Status) or status.verdict not in allowed:
                    raise ValueError(f"Entry.{field_name}: expected a Status, one of "
                                     f"{allowed}, got {status!r}")
        if not self.codes and any(self.verdict(b) == "diagnosed" for b in self.backends):
            raise ValueError(f"{self.name}: 'diagnosed' needs the codes that name the cause")

    def build(self, twin: str, backend: str = "torch") -> Case:
        """A fresh ``Case`` of the ``twin`` (``"buggy"`` or ``"fixed"``) in ``backend``."""
        if twin not in ("buggy", "fixed"):
            raise ValueError(f"twin: expected 'buggy' or 'fixed', got {twin!r}")
        if backend not in self.backends:
            raise ValueError(f"backend: {self.name} is reproduced on {self.backends}, "
                             f"got {backend!r}")
        return self.reproduce(twin == "buggy", backend)

    def status_for(self, backend: str = "torch") -> Status:
        """The recorded status of the buggy version on ``backend``."""
        return self.status[backend] if isinstance(self.status, dict) else self.status

    def fixed_status_for(self, backend: str = "torch") -> Status:
        """The recorded status of the fixed twin on ``backend``."""
        return (self.fixed_status[backend] if isinstance(self.fixed_status, dict)
                else self.fixed_status)

    def status_on(self, backend: str = "torch") -> str:
        """The recorded status of the buggy version on ``backend``, in words."""
        return str(self.status_for(backend))

    def fixed_status_on(self, backend: str = "torch") -> str:
        """The recorded status of the fixed twin on ``backend``, in words."""
        return str(self.fixed_status_for(backend))

    def verdict(self, backend: str = "torch") -> str:
        """``"diagnosed"``, ``"symptom"`` or ``"missed"``."""
        return self.status_for(backend).verdict

    def fixed_verdict(self, backend: str = "torch") -> str:
        """``"clean"`` or ``"false alarm"``."""
        return self.fixed_status_for(backend).verdict

    def symptom_codes(self, backend: str = "torch") -> tuple[str, ...]:
        """The codes a ``symptom`` status lists."""
        status = self.status_for(backend)
        return status.codes if status.verdict == "symptom" else ()

    def false_alarm_codes(self, backend: str = "torch") -> tuple[str, ...]:
        """The codes a ``false_alarm`` fixed status lists."""
        status = self.fixed_status_for(backend)
        return status.codes if status.verdict == "false alarm" else ()
