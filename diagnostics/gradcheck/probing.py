"""Finite-difference measurements on one tensor: along random directions, or element by element.

A *target* is a tensor whose analytic gradient is known and which a run can move: a parameter,
or a point at a module boundary. ``Prober.probe`` compares directional derivatives along random
Gaussian directions (unit length, so every element has weight and one derivative costs two
runs whatever the size); ``Prober.suspect_elements`` checks single elements of a failing
tensor, narrowed down by ``Prober.suspects`` to the chunks that fail where the error is not
spread; ``Prober.elements`` checks single elements; ``Prober.true_slope`` measures the true
gradient along any direction, for the pattern classifier.

Derivatives compared with the backward pass start with a forward difference (see ``kinks``)
and are measured on replayed runs (only the modules from the target on are computed, see
``replay.py``). When the first one of a target does not agree, its first step is taken again
on a full run: if the two losses differ by more than rounding, the target is measured on full
runs from then on (that derivative included), so a model that replay does not fit costs time
but never changes a verdict. A first derivative measured without ``confirm`` (a deferred probe,
a detail of a tensor known wrong) takes its step back on a full run instead: where it shows a
clear mismatch, that full run vouches for the replayed step (``Prober._vouched``), and a tensor
wrong only as a consequence costs two runs, not three.
"""
from dataclasses import dataclass, field

import numpy as np

from .kinks import ROUNDING, Tolerance, estimate_slope, relative_error

KINK_RETRIES = 3    # extra directions a tensor may use when probes land on kinks
CONFIRM = 2         # directions that must show a mismatch before a tensor is called wrong
CHUNKS = 8          # pieces a failing region is cut into when narrowing it down
REFINE_ABOVE = 4    # narrow down while the failing region holds more than this x max_elements
CONSEQUENCE_MISMATCHES = 4   # disagreeing elements enough to show a tensor wrong downstream
TIGHT = 0.01        # a first direction this far inside the tolerance is enough (see probe)
SAMPLE = 4          # elements of a large failing tensor checked before narrowing it down


@dataclass(frozen=True)
class Target:
    """A tensor to check: ``name`` (a parameter's, or a point's label) and its analytic gradient."""

    name: str
    analytic: np.ndarray
    parameter: str | None = None
    point: object = None

    @property
    def shape(self):
        return self.analytic.shape


@dataclass(frozen=True)
class Round:
    """Directional derivatives on one support. With ``confirm``, a mismatch counts only when
    no direction of the round landed on a kink: at a kink sitting exactly at the point, the
    kink test can miss (the one-sided slopes of several kinks may cancel), so a round that
    shows kinks at all cannot be trusted to show a wrong gradient."""

    slopes: tuple
    confirm: bool = True

    @property
    def status(self):
        statuses = [s.status for s in self.slopes]
        if "mismatch" in statuses and not (self.confirm and "kink" in statuses):
            return "mismatch"
        return "ok" if "ok" in statuses and "mismatch" not in statuses else "unchecked"


@dataclass
class Probing:
    """The directional derivatives measured on one target, in rounds (supports)."""

    rounds: list = field(default_factory=list)

    @property
    def slopes(self):
        return [s for r in self.rounds for s in r.slopes]

    @property
    def status(self):
        statuses = {r.status for r in self.rounds}
        if "mismatch" in statuses:
            return "mismatch"
        return "ok" if "ok" in statuses else "unchecked"

    @property
    def directions(self):
        return sum(s.status != "kink" for s in self.slopes)

    @property
    def kinks(self):
        return sum(s.status == "kink" for s in self.slopes)

    def extend(self, other):
        self.rounds.extend(other.rounds)

    def worst(self):
        """The slope with the largest relative error (None when every probe hit a kink)."""
        measured = [s for s in self.slopes if s.status != "kink"]
        return max(measured, key=lambda s: s.relative_error(), default=None)


@dataclass(frozen=True)
class Elements:
    """Single elements checked: flat indices, numerical values (NaN at kinks), analytic values."""

    indices: np.ndarray
    numerical: np.ndarray
    analytical: np.ndarray
    mismatched: np.ndarray   # bool per index

    @property
    def kinks(self):
        return int(np.isnan(self.numerical).sum())

    def relative_errors(self):
        return np.array([0.0 if np.isnan(n) else relative_error(n, a)
                         for n, a in zip(self.numerical, self.analytical)])

    def joined(self, other):
        """These elements and ``other``'s, in that order."""
        return Elements(*(np.concatenate([getattr(self, f), getattr(other, f)])
                          for f in ("indices", "numerical", "analytical", "mismatched")))

    def worst(self):
        """Position in ``indices`` of the worst element, mismatched ones first (None if empty)."""
        if len(self.indices) == 0:
            return None
        errors = self.relative_errors() + self.mismatched * 2.0  # mismatches rank above passes
        return int(np.argmax(errors))


class Prober:
    def __init__(self, evaluator, settings, loss_0):
        self.evaluator, self.settings, self.loss_0 = evaluator, settings, loss_0
        self.rng = np.random.default_rng(settings.seed)
        self.confirm_rng = np.random.default_rng([settings.seed, 1])   # see confirm_round
        self.deferred = {}   # target name -> (direction, analytic) of its deferred mismatch
        self.tolerance = Tolerance(settings.rtol, settings.atol)
        self.full_runs = set()   # names of targets measured on full runs only
        self.replay_agreed = set()   # names of targets whose replayed and full runs agreed
        self.full_back = set()   # names of targets that took a step back on a full run (slope)
        self.measured = {}   # target name -> [(direction, true derivative)] (_remember)

    def slope(self, target, direction, analytic=None, *, confirm=True, losses=None):
        """The derivative along ``direction`` (any length the step should scale with).

        ``losses``: ``t -> loss`` along ``direction`` measured before (taken as they are), and
        filled with the ones this measurement takes. A target not yet known to replay right
        (see the module docstring) takes the backward step of its first measurement without
        ``confirm`` that needs one on a full run, which can vouch for the replayed forward
        step (see ``_vouched``); where it cannot, the forward step is taken again on a full
        run as for any target, and the slope is measured from the two full runs.
        """
        name, step = target.name, self.settings.eps
        replay = name not in self.full_runs and (analytic is not None
                                                 or name in self.replay_agreed)
        losses = {} if losses is None else losses
        back = (replay and not confirm and name not in self.replay_agreed
                and name not in self.full_back and -step not in losses)
        slope = self._slope(target, direction, analytic, confirm, replay, losses,
                            full_back=back)
        back = back and -step in losses
        if back:
            self.full_back.add(name)
            if self._vouched(slope, losses):
                return slope
        if replay and slope.status != "ok" and name not in self.replay_agreed:
            full = self._loss(target, step * direction, replay=False)
            replayed = losses[step]
            if full == replayed or abs(full - replayed) <= 4 * ROUNDING * max(
                    abs(full), abs(replayed), 1e-300):
                self.replay_agreed.add(name)
                if not back:
                    return slope
            else:
                self.full_runs.add(name)
                kept = {-step: losses[-step]} if back else {}
                losses.clear()
                losses.update(kept)
                replay = False
            losses[step] = full
            slope = self._slope(target, direction, analytic, confirm, replay, losses)
        return slope

    def _vouched(self, slope, losses):
        """Whether a mismatch measured from a replayed step forward and a full step back holds
        whatever the replayed run is off by. Say it is off by ``D``: the one-sided slopes then
        differ by ``D / eps`` more, and the central difference is off by ``D / (2 eps)``.
        ``estimate_slope`` took the mismatch (2 runs) because the one-sided slopes agree within
        their rounding bound ``4 r / eps`` (``r`` the rounding of one loss) plus a tenth of the
        disagreement; it holds when the disagreement also exceeds ``4 r / eps``: a right
        gradient, whose disagreement would be ``|D| / (2 eps)``, would need ``|D| <= 4.2 r``
        and ``|D| > 8 r`` at once. A wrong one stays a mismatch, its value off by at most
        about a twentieth of its error."""
        if slope.status != "mismatch" or slope.evaluations != 2:
            return False
        step = self.settings.eps
        rounding = ROUNDING * max(abs(self.loss_0), abs(losses[step]), abs(losses[-step]),
                                  1e-300)
        return abs(slope.value - slope.analytic) > 4 * rounding / step

    def _loss(self, target, delta, *, replay):
        return self.evaluator.loss(parameter=target.parameter, point=target.point, delta=delta,
                                   replay=replay)

    def _slope(self, target, direction, analytic, confirm, replay, losses, *, full_back=False):
        """``estimate_slope`` along ``direction``, taking the losses already in ``losses`` and
        adding the ones it measures (``full_back``: the step back by ``eps`` on a full run)."""
        back = -self.settings.eps

        def loss_at(t):
            if t not in losses:
                losses[t] = self._loss(target, t * direction,
                                       replay=replay and not (full_back and t == back))
            return losses[t]

        return estimate_slope(loss_at, self.loss_0, step=self.settings.eps,
                              tolerance=self.tolerance, analytic=analytic, confirm=confirm,
                              forward_first=True)

    def probe(self, target, *, support=None, probes=None, confirm=True, defer=False,
              slopes=()):
        """Up to ``probes`` random directions (on ``support``, flat indices, when given).

        A direction that lands on a kink is replaced by a new one, at most ``KINK_RETRIES``
        times. With ``confirm``, a mismatch must show in ``CONFIRM`` directions, and a kink
        in the same round voids it (see ``Round``); without (pieces of a tensor already known
        to be wrong), one mismatch ends the round, and a disagreement whose one-sided slopes
        agree is taken without the smaller step (see ``estimate_slope``).
        A first direction whose forward difference agrees within ``TIGHT`` of the tolerance
        ends the round as "ok": a wrong gradient's error along a random direction is a
        Gaussian, so one wrong enough to fail a direction lands that close to zero with a
        chance of about ``TIGHT`` (below 1%, and less the larger the error), while a right
        one nearly always does (rounding and curvature alone are a few thousandths of it).
        With ``defer``, the round ends at its first mismatch, measured as without ``confirm``
        (no smaller step where the one-sided slopes agree) unless the round already met a
        kink: ``confirm_round`` measures that direction again in full and takes the round on
        to ``CONFIRM`` mismatches where the caller cannot vouch for the tensor. ``slopes``: a
        round's directions so far.
        """
        wanted = self.settings.probes if probes is None else probes
        needed = 1 if defer or not confirm else CONFIRM
        slopes = list(slopes)
        for _ in range(wanted + KINK_RETRIES - len(slopes)):
            if slopes and _done(slopes, wanted, needed, confirm):
                break
            direction = self._direction(target.shape, support)
            analytic = float(np.vdot(target.analytic, direction))
            provisional = defer and not any(s.status == "kink" for s in slopes)
            losses = {}
            slopes.append(self.slope(target, direction, analytic,
                                     confirm=confirm and not provisional, losses=losses))
            self._remember(target, direction, slopes[-1])
            if provisional and slopes[-1].status == "mismatch":
                self.deferred[target.name] = (direction, analytic, losses)
            if len(slopes) == 1 and _tight(slopes[0]):
                break
        return Probing([Round(tuple(slopes), confirm)])

    def confirm_round(self, target, probing, support=None):
        """A deferred ``probe`` (``probing``, one round): its mismatching direction measured
        again with the smaller step (the losses it took are used again), and the round taken
        on to ``CONFIRM`` mismatches, with directions from a separate generator, so that
        confirming one tensor does not change the directions drawn for the others; chunks, as
        in ``probe``, where it turns out unchecked."""
        direction, analytic, losses = self.deferred.pop(target.name)
        slopes = list(probing.rounds[0].slopes[:-1])
        slopes.append(self.slope(target, direction, analytic, losses=losses))
        self._remember(target, direction, slopes[-1])
        main, self.rng = self.rng, self.confirm_rng
        try:
            result = self.probe(target, support=support, slopes=slopes)
            if result.status == "unchecked":
                result.extend(self.probe_chunks(target, support))
        finally:
            self.rng = main
        return result

    def _remember(self, target, direction, slope):
        """Keep a mismatch that the smaller step vouched for (``estimate_slope``: the
        difference did not move when the step shrank): its value is the true derivative."""
        kept = self.measured.setdefault(target.name, [])
        if (slope.status == "mismatch" and slope.evaluations == 4
                and not any(d is direction for d, _ in kept)):
            kept.append((direction, slope.value))

    def probe_chunks(self, target, support=None):
        """One round on each of ``CHUNKS`` pieces (of ``support``): a tensor whose probes
        landed on kinks may still have pieces that can be checked."""
        result = Probing()
        indices = np.arange(target.analytic.size) if support is None else np.asarray(support)
        for piece in np.array_split(indices, min(CHUNKS, len(indices))):
            result.extend(self.probe(target, support=piece, probes=1))
        return result

    def elements(self, target, indices, *, confirm=True, enough=None):
        """Single-element central differences at flat ``indices`` (``confirm``: see kinks);
        with ``enough``, only until that many elements disagree."""
        indices = np.asarray(indices, dtype=np.int64)
        numerical = np.full(len(indices), np.nan)
        analytical = target.analytic.reshape(-1)[indices].astype(np.float64)
        mismatched = np.zeros(len(indices), dtype=bool)
        checked = len(indices)
        for position, index in enumerate(indices):
            basis = np.zeros(target.analytic.size)
            basis[index] = 1.0
            slope = self.slope(target, basis.reshape(target.shape), float(analytical[position]),
                               confirm=confirm)
            if slope.value is not None:
                numerical[position] = slope.value
            mismatched[position] = slope.status == "mismatch"
            if enough is not None and mismatched.sum() >= enough:
                checked = position + 1
                break
        return Elements(indices[:checked], numerical[:checked], analytical[:checked],
                        mismatched[:checked])

    def consequence_elements(self, target):
        """Single elements of a tensor that is wrong because the gradient reaching its module
        is: the error is spread over it, so random elements are checked until
        ``CONSEQUENCE_MISMATCHES`` disagree (at most ``max_elements``), without narrowing the
        tensor down chunk by chunk first."""
        size = target.analytic.size
        count = min(self.settings.max_elements, size)
        indices = self.rng.choice(size, size=count, replace=False)
        return self.elements(target, indices, confirm=False, enough=CONSEQUENCE_MISMATCHES)

    def suspect_elements(self, target, support=None, *, enough=None):
        """Single elements (without ``confirm``) of a failing tensor, at most ``max_elements``,
        drawn from the chunks that fail (``suspects``); ``enough`` as in ``elements``.

        Where the tensor is cut into chunks at all, ``SAMPLE`` random elements of it come
        first: when half of them or more disagree, the error is spread over it, and the rest
        are drawn from the whole tensor too, without the chunks' directional probes (a
        cost, not a verdict: the verdict comes from directional probes). An error confined
        to a share ``f`` of the elements passes for spread with a chance of about ``6 f**2``;
        its elements are then drawn at random, and fewer of them show it.
        """
        cap = self.settings.max_elements
        pool = np.arange(target.analytic.size) if support is None else np.asarray(support)
        if len(pool) <= REFINE_ABOVE * cap:
            return self.elements(target, self.suspects(target, support), confirm=False,
                                 enough=enough)
        drawn = self.rng.choice(pool, size=cap, replace=False)
        sample = self.elements(target, drawn[:SAMPLE], confirm=False, enough=enough)
        found = int(sample.mismatched.sum())
        if enough is not None and found >= enough:
            return sample
        left = None if enough is None else enough - found
        if 2 * found >= SAMPLE:
            rest = drawn[SAMPLE:]
        else:
            rest = np.setdiff1d(self.suspects(target, support), sample.indices)
            rest = rest[:cap - len(sample.indices)]
        return sample.joined(self.elements(target, rest, confirm=False, enough=left))

    def suspects(self, target, support=None):
        """At most ``max_elements`` flat indices (from ``support`` when given), drawn from the
        chunks of ``target`` that fail.

        The failing region is cut into ``CHUNKS`` pieces, each probed along one direction, and
        the failing pieces are kept, until the region is small enough or most pieces fail (the
        error is spread out, and any sample shows it).
        """
        cap = self.settings.max_elements
        regions = [np.arange(target.analytic.size) if support is None else np.asarray(support)]
        while sum(len(r) for r in regions) > REFINE_ABOVE * cap:
            pieces = [p for region in regions
                      for p in np.array_split(region, min(CHUNKS, len(region)))]
            verdicts = [self.probe(target, support=p, probes=1, confirm=False).status
                        for p in pieces]
            failing = ([p for p, v in zip(pieces, verdicts) if v == "mismatch"]
                       or [p for p, v in zip(pieces, verdicts) if v == "unchecked"])
            if not failing:
                break
            regions = failing
            if 2 * len(failing) > len(pieces) or all(len(p) == 1 for p in pieces):
                break
        pool = np.concatenate(regions)
        chosen = pool if len(pool) <= cap else self.rng.choice(pool, size=cap, replace=False)
        return np.sort(chosen)

    def along_support(self, target, support=None):
        """``(u, <true gradient, u>)`` along the random directions measured on the whole of
        ``support`` (every element of it moved) with a central difference, ``u`` as
        ``true_slope`` takes it (the values at ``support`` only, when given)."""
        size = target.analytic.size if support is None else len(support)
        pairs = []
        for direction, value in self.measured.get(target.name, ()):
            flat = direction.reshape(-1)
            if np.count_nonzero(flat) != size:
                continue      # a chunk's direction, or an element's
            pairs.append((direction if support is None else flat[support], value))
        return pairs

    def true_slope(self, target, support=None):
        """``along(w)``: the true gradient's inner product with ``w`` (None at a kink); with
        ``support``, ``w`` holds the values at those flat indices only."""
        def along(w):
            norm = float(np.linalg.norm(w))
            if norm == 0.0:
                return 0.0
            direction = w / norm
            if support is not None:
                direction = np.zeros(target.analytic.size)
                direction[support] = w.reshape(-1) / norm
                direction = direction.reshape(target.shape)
            slope = self.slope(target, direction)
            return None if slope.value is None else slope.value * norm

        return along

    def _direction(self, shape, support):
        size = int(np.prod(shape, dtype=np.int64))
        direction = np.zeros(size)
        if support is None:
            direction[:] = self.rng.standard_normal(size)
        else:
            direction[support] = self.rng.standard_normal(len(support))
        norm = np.linalg.norm(direction)
        return (direction / norm if norm > 0 else direction).reshape(shape)


def _done(slopes, wanted, needed, confirm):
    """Whether a round of ``probe`` has seen enough."""
    statuses = [s.status for s in slopes]
    mismatches, kinks = statuses.count("mismatch"), statuses.count("kink")
    return (mismatches >= needed or (mismatches == 0 and len(slopes) - kinks >= wanted)
            or bool(confirm and mismatches and kinks))


def _tight(slope):
    return slope.status == "ok" and slope.closeness is not None and slope.closeness <= TIGHT
