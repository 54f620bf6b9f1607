"""The argument checks every diagnostic shares, so that one rule decides what a number is.

NumPy scalars count as numbers everywhere (``np.int64(3)`` is an integer, ``np.float32(0.1)``
a float); ``bool`` is never a number. Each check raises ``DiagnosticsError`` naming the
argument, and returns the value as a plain Python ``int`` or ``float``.
"""
import math
import numbers

from .errors import require


def check_int(value, argument, *, minimum, noun="an integer"):
    """``value`` as an ``int``; a ``DiagnosticsError`` unless it is an integer >= ``minimum``."""
    ok = (isinstance(value, numbers.Integral) and not isinstance(value, bool)
          and int(value) >= minimum)
    require(ok, argument, f"{noun} >= {minimum}", repr(value))
    return int(value)


def check_float(value, argument, *, expected, accept=lambda v: True):
    """``value`` as a ``float``; a ``DiagnosticsError`` (saying ``expected``) unless it is a
    finite real number that ``accept`` takes."""
    ok = (isinstance(value, numbers.Real) and not isinstance(value, bool)
          and math.isfinite(float(value)) and accept(float(value)))
    require(ok, argument, expected, repr(value))
    return float(value)


def check_callable(value, argument, expected="a callable"):
    require(callable(value), argument, expected, type(value).__name__)
    return value
