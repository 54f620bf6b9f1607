"""``UnitActivity``: per layer (or weight), whether each unit gave a nonzero magnitude in the
last sampled steps: of its output, or of the gradient that reached its row of weights."""
import numpy as np


class UnitActivity:
    """Per layer, when each unit last gave a nonzero value, over the last ``window`` sampled
    steps: a dead-unit check costs one comparison, and a step one masked write."""

    def __init__(self, window):
        self.window = window
        self._rings = {}

    def add(self, name, record):
        """An ``ActivationRecord``: each unit's largest output magnitude (max(max, -min) is
        max(|max|, |min|) since max >= min; NaN stays NaN)."""
        self.add_magnitude(name, np.maximum(record.unit_max, -record.unit_min),
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

    def once_active(self, name):
        """Boolean array of the units that gave a nonzero value at some sampled step since the
        first (a dead one of these died during training); None for an unknown layer."""
        ring = self._rings.get(name)
        return None if ring is None else ring.once_active()

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
    """The last ``window`` steps of one layer: per unit the step it was last nonzero in
    (a magnitude that is not 0, NaN included), and the examples of each step."""

    def __init__(self, window, units):
        self.units = units
        self._last_active = np.full(units, -1, dtype=np.int64)
        self._examples = np.zeros(window, dtype=np.int64)
        self._total = 0          # sum of _examples
        self._added = self.filled = 0
        self._dead = None        # dead() until the next add

    def add(self, magnitude, examples):
        self._dead = None
        self._last_active[magnitude != 0] = self._added
        slot = self._added % len(self._examples)
        self._total += int(examples) - int(self._examples[slot])
        self._examples[slot] = examples
        self._added += 1
        self.filled = min(self._added, len(self._examples))

    def examples(self):
        return self._total

    def once_active(self):
        return self._last_active >= 0

    def dead(self):
        if self._dead is None:
            self._dead = self._last_active < self._added - self.filled
            self._dead.flags.writeable = False   # shared by the calls until the next add
        return self._dead
