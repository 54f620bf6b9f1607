"""What the loss itself allows on one batch, for ``overfit_one_batch``: the lowest value its
output can give it (label smoothing, a KL or regularisation term: a floor above 0), the noise
of a forward that samples, and parameters that the user's ``train_step`` trains against it (a
GAN's other network). Each is measured on the run, never read off a model's type or a name:
a loss that cannot reach 0 on one batch by design says nothing about a bug."""
import math

import numpy as np

from .. import outputs
from ..batch import first_parameter
from . import _training as T

PROBE_STEP = 1e-2      # a probe moves the ideal output by 1% of its distance to the model's
PROBE_SLACK = 1e-6     # relative: a probe this little below the floor is rounding
NOISE_DRAWS = 5        # forwards at the same parameters to see a sampling forward
NOISE_SPREAD = 1e-2    # losses further apart than 1% of their size: the forward samples
OPPONENT_EVERY = 3     # steps between two measures of what the opponent's update does
OPPONENT_LOOKS = 10    # sampled steps without a move of theirs: stop watching
OPPONENT_SAMPLES = 5   # measures needed to call an update "against" the loss...
OPPONENT_SHARE = 0.75  # ...and the share of them where it raised the loss


def ideal_floor(backend, batch, output, key, logits, targets):
    """For float ``targets`` of the logits' shape (a regression, a reconstruction): the loss
    with the targets themselves as the logits, when that is the lowest the logits can reach
    (no probe around it goes lower): the part of the loss the output cannot remove (a
    constant, a KL or regularisation term on other outputs). 0.0 otherwise."""
    if (logits is None or targets is None or targets.dtype.kind != "f"
            or logits.shape != targets.shape):
        return 0.0
    like = first_parameter(backend)

    def loss_at(array):
        value = backend.from_numpy(array.astype(logits.dtype), like=like)
        with backend.no_grad():
            return backend.scalar(batch.loss(outputs.replace(output, key, value)))
    try:
        floor = loss_at(targets)
        away = logits.astype(np.float64) - targets
        shake = np.random.default_rng(0).standard_normal(targets.shape)
        scale = float(np.sqrt(np.mean(away ** 2))) or 1.0
        probes = [PROBE_STEP * away, PROBE_STEP * scale * shake]
        lowest = min(loss_at(targets + sign * probe) for probe in probes for sign in (1, -1))
    except Exception:  # a loss that cannot take these outputs: no floor known
        return 0.0
    if not (math.isfinite(floor) and floor > 0 and math.isfinite(lowest)):
        return 0.0
    return floor if lowest >= floor - PROBE_SLACK * max(floor, 1.0) else 0.0


def loss_draws(backend, batch, draws=NOISE_DRAWS):
    """The loss of the batch ``draws`` times at the same parameters, without a graph."""
    values = []
    with backend.no_grad():
        for _ in range(draws):
            values.append(backend.scalar(batch.output_and_loss(backend)[1]))
    return values


def samples(values):
    """True when the same batch at the same parameters gives losses more than NOISE_SPREAD
    apart: the forward samples (reparameterisation noise, dropout)."""
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < 2:
        return False
    return max(finite) - min(finite) > NOISE_SPREAD * max(abs(float(np.mean(finite))), 1e-12)


class Opponents:
    """Trainable parameters outside ``optimizer`` that the user's ``train_step`` moves (another
    network's optimizer inside the step), and what their update does to this loss: every
    OPPONENT_EVERY-th step, the loss after the step minus the loss with their values put back
    (same RNG state for both). Watching stops after OPPONENT_LOOKS looks without a move."""

    def __init__(self, backend, batch, optimizer, train_step):
        self.backend, self.batch = backend, batch
        names = T.unheld_parameters(backend, optimizer) if train_step is not None else []
        self.watched = names
        self.moved = []        # names, in the model's order
        self.effects = []      # loss change due to their update, per measured step
        self.looks = 0

    def step(self, index, step_once):
        """``step_once()``, measured at the sampled steps."""
        if not self.watched or index % OPPONENT_EVERY:
            return step_once()
        backend = self.backend
        params = dict(backend.named_parameters())
        before = {name: backend.snapshot_tensor(params[name]) for name in self.watched}
        result = step_once()
        moved = [name for name in self.watched if not np.array_equal(
            backend.to_numpy(params[name]), backend.to_numpy(before[name][0]))]
        self.looks += 1
        if not moved:
            if self.looks >= OPPONENT_LOOKS and not self.moved:
                self.watched = []
            return result
        self.moved += [name for name in moved if name not in self.moved]
        self.effects.append(self._effect({name: before[name] for name in moved}, params))
        return result

    def _effect(self, before, params):
        """The loss now minus the loss with the moved parameters as they were."""
        backend = self.backend
        rng = backend.rng_state()
        now = {name: backend.snapshot_tensor(params[name]) for name in before}
        new = self._loss(rng)
        try:
            for name, saved in before.items():
                backend.restore_tensor(params[name], saved)
            old = self._loss(rng)
        finally:
            for name, saved in now.items():
                backend.restore_tensor(params[name], saved)
            backend.set_rng_state(rng)
        return new - old

    def _loss(self, rng):
        self.backend.set_rng_state(rng)
        with self.backend.no_grad():
            return self.backend.scalar(self.batch.output_and_loss(self.backend)[1])

    @property
    def against(self):
        """Their update raised this loss at OPPONENT_SHARE of enough measured steps."""
        finite = [e for e in self.effects if math.isfinite(e)]
        return (len(finite) >= OPPONENT_SAMPLES
                and sum(e > 0 for e in finite) >= OPPONENT_SHARE * len(finite))

    def evidence(self):
        raised = [e for e in self.effects if math.isfinite(e) and e > 0]
        return {"parameters": list(self.moved), "measured_steps": len(self.effects),
                "raised_at": len(raised),
                "mean_effect": float(np.mean(self.effects)) if self.effects else None}
