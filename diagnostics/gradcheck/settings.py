"""``Settings``: the options of a gradient check, checked before any work starts."""
import math
from dataclasses import dataclass

from ..errors import require

MODES = ("auto", "full")


@dataclass(frozen=True)
class Settings:
    """How hard to look, and how close numerical and analytical derivatives must be.

    ``mode``: "auto" probes every tensor along random directions and looks at single elements
    only where a tensor fails; "full" also checks every element of every parameter.
    ``eps``: the finite-difference step (the length of a probe's step, or one element's).
    ``rtol``, ``atol``: a derivative passes when ``|numerical - analytical| <= atol + rtol *
    max(|numerical|, |analytical|)`` plus the rounding noise of the step.
    ``probes``: random directions per tensor. ``max_elements``: elements checked one by one in a
    failing tensor (mode "auto"). ``seed``: the private generator's seed.
    """

    mode: str = "auto"
    eps: float = 1e-6
    rtol: float = 1e-4
    atol: float = 1e-8
    probes: int = 3
    max_elements: int = 32
    seed: int = 0

    def __post_init__(self):
        require(self.mode in MODES, "mode", f"one of {MODES}", repr(self.mode))
        require(_positive(self.eps) and self.eps < 1, "eps", "a number in (0, 1)", repr(self.eps))
        require(_non_negative(self.rtol), "rtol", "a number >= 0", repr(self.rtol))
        require(_non_negative(self.atol), "atol", "a number >= 0", repr(self.atol))
        require(_count(self.probes), "probes", "an int >= 1", repr(self.probes))
        require(_count(self.max_elements), "max_elements", "an int >= 1", repr(self.max_elements))
        require(isinstance(self.seed, int) and not isinstance(self.seed, bool) and self.seed >= 0,
                "seed", "an int >= 0", repr(self.seed))


def _positive(value):
    return _non_negative(value) and value > 0


def _non_negative(value):
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
