"""``UnitActivity``: per layer (or weight), each unit's largest magnitude in the last sampled
steps: of its output, or of the gradient that reached its row of weights."""
import numpy as np


class UnitActivity:
    """A ring of the last ``window`` per-unit extremes of each layer: a dead-unit check costs
    one reduction instead of a pass over records."""

    def __init__(self, window):
        self.window = window
        self._rings = {}

    def add(self, name, record):
        """An ``ActivationRecord``: each unit's largest output magnitude."""
        self.add_magnitude(name, np.maximum(np.abs(record.unit_max), np.abs(record.unit_min)),
                           record.examples)

    def add_magnitude(self, name, magnitude, examples):
        """One sampled step: ``magnitude`` per unit, from ``examples`` values each."""
        ring = self._rings.get(name)
        if ring is None or ring.units != magnitude.size:
            ring = self._rings[name] = _Ring(self.window, magnitude.size)
        ring.add(magnitude, examples)

    def examples(self, name):
        """Values per unit in the ring, and the sampled steps they came from."""
        ring = self._rings.get(name)
        return (0, 0) if ring is None else (ring.examples(), ring.filled)

    def dead(self, name, *, min_examples, min_samples):
        """Boolean array of the units that gave exactly 0 on every value of the window; None
        until the window holds ``min(min_samples, window)`` sampled steps and ``min_examples``
        values per unit (one batch misses the units that fire on few inputs)."""
        ring = self._rings.get(name)
        if (ring is None or ring.filled < min(min_samples, self.window)
                or ring.examples() < min_examples):
            return None
        return ring.dead()


class _Ring:
    def __init__(self, window, units):
        self.units = units
        self._magnitude = np.zeros((window, units))   # per unit: max(|largest|, |smallest|)
        self._examples = np.zeros(window, dtype=np.int64)
        self._next = self.filled = 0
        self._dead = None    # dead() until the next add

    def add(self, magnitude, examples):
        self._dead = None
        self._magnitude[self._next] = magnitude
        self._examples[self._next] = examples
        self._next = (self._next + 1) % len(self._examples)
        self.filled = min(self.filled + 1, len(self._examples))

    def examples(self):
        return int(self._examples[:self.filled].sum())

    def dead(self):
        if self._dead is None:
            self._dead = self._magnitude[:self.filled].max(axis=0) == 0
            self._dead.flags.writeable = False   # shared by the calls until the next add
        return self._dead
