"""minigrad's own random-number generator (init, dropout, ``randn``).

It is seeded like ``torch.manual_seed``.
"""
import numpy as np

_generator = np.random.default_rng(0)


def manual_seed(seed):
    """Reseed the generator that init, dropout and ``randn`` draw from."""
    global _generator
    _generator = np.random.default_rng(seed)
    return _generator


def generator():
    """The current generator (a ``numpy.random.Generator``)."""
    return _generator


def get_rng_state():
    """The generator's state, to hand back to ``set_rng_state``."""
    return _generator.bit_generator.state


def set_rng_state(state):
    _generator.bit_generator.state = state
