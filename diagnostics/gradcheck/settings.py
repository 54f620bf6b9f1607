"""``Settings``: the options of a gradient check, checked before any work starts."""
from dataclasses import dataclass

from ..errors import require
from ..validators import check_float, check_int

MODES = ("auto", "full")


@dataclass(frozen=True)
class Settings:
    """How hard to look, and how close numerical and analytical derivatives must be.

    ``mode``: "auto" probes every tensor along random directions and looks at single elements
    only where a tensor fails; "full" also checks every element of every parameter.
    ``eps``: the finite-difference step (the length of a probe's step, or one element's).
    ``rtol``, ``atol``: a derivative passes when ``|numerical - analytical| <= atol + rtol *
    max(|numerical|, |analytical|)`` plus the rounding noise of the step.
    ``probes``: random directions per tensor (a first one that agrees within 1% of the
    tolerance is enough, see ``Prober.probe``). ``max_elements``: elements checked one by one in a
    failing tensor (mode "auto"). ``seed``: the private generator's seed. NumPy scalars are
    accepted and stored as Python numbers.
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
        checked = {
            "eps": check_float(self.eps, "eps", expected="a number in (0, 1)",
                               accept=lambda v: 0 < v < 1),
            "rtol": check_float(self.rtol, "rtol", expected="a number >= 0",
                                accept=lambda v: v >= 0),
            "atol": check_float(self.atol, "atol", expected="a number >= 0",
                                accept=lambda v: v >= 0),
            "probes": check_int(self.probes, "probes", minimum=1, noun="an int"),
            "max_elements": check_int(self.max_elements, "max_elements", minimum=1,
                                      noun="an int"),
            "seed": check_int(self.seed, "seed", minimum=0, noun="an int"),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)
