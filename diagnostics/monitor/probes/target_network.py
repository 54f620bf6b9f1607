"""A network that computes the loss's targets: a copy of the trained one that must follow it.

A DQN's target network, a Polyak-averaged critic, a mean-teacher or BYOL EMA teacher: a second
copy of the trained network runs without gradients (``torch.no_grad()``, ``requires_grad_(False)``)
and its output becomes what the trained network's output is scored against. No optimizer holds
it; only the user's refresh moves it (``target.load_state_dict(online.state_dict())`` every N
steps, ``p_t.mul_(m).add_(p, alpha=1 - m)`` after each step). A refresh that never runs or writes
elsewhere raises nothing: the targets keep coming from the initial network.

Found by mechanism, not by name, on sampled iterations only: a global module forward hook
(``register_module_forward_hook``, on while an iteration is sampled) sees every module's call;
a module is a candidate when it is not the watched model's, no optimizer step holds any of its
parameters, its parameter shapes are those of the watched model or of one of its modules with
two layers or more (a copy of the network, not a layer of the same width), and its output does
not require grad. It is *seen* in an iteration when, after its call, a loss function of
``probes/loss_calls.py`` scores an input that has a graph against a target that has none. The
outermost such module is followed (a copy's own layers are copies too).

At its first sighting its parameters are set aside (one clone, on the device) and it must be
a copy: closer to the trained module than half its own norm (two networks initialised
independently are about sqrt(2) norms apart; a pretrained teacher beside a new student is not
a copy of it). Then each sampled step queues, in the one transfer, the distances that tell
what the refresh did: how far the target moved from where it was first seen, how far the
trained module is from that start, how far it is from the target now, and a fingerprint
(sum, sum of squares) that tells whether the target changed since the last sighting.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

from ..compiled import module_underneath
from ..layout import optimizer_parameter_ids
from .base import Probe, Signal
from .loss_calls import LOSS_CALLS, argument

_FOLLOWED = 4        # candidate networks followed at once
_MIN_LAYERS = 2      # a copy of a network: two modules with parameters of their own, or more


@dataclass(frozen=True)
class TargetObservation:
    """One sampled step's distances (Euclidean, over all the parameters)."""

    step: int
    moved: float         # the target from where it was first seen
    online_moved: float  # the trained module from the target's first-seen parameters
    gap: float           # the trained module from the target now
    changed: bool        # the target's fingerprint differs from the previous sighting's


@dataclass(frozen=True)
class TargetNetworkTrack:
    """One network that computes targets, followed across the sampled steps it was seen at."""

    type_name: str
    held_on: str           # where the user holds it, when found (an attribute of the loop's
                           # objects: "self.target"), else ""
    trained: str           # the trained module it copies ("" for the whole watched model)
    trained_type: str
    norm: float            # the target's parameter norm when first seen
    parameters: int        # elements
    first_step: int
    last_step: int
    observations: tuple[TargetObservation, ...]


@dataclass(frozen=True)
class TargetNetworks(Signal):
    """The networks computing targets followed so far."""

    tracks: tuple[TargetNetworkTrack, ...]


class _Followed:
    def __init__(self, module, trained_name, trained_module, step):
        self.ref = weakref.ref(module)
        self.type_name = type(module).__name__
        self.trained_name, self.trained_ref = trained_name, weakref.ref(trained_module)
        self.trained_type = type(trained_module).__name__
        self.start = None          # clones of its parameters when first seen
        self.norm = None
        self.parameters = sum(p.numel() for p in module.parameters())
        self.first_step = self.last_step = step
        self.observations = []
        self.fingerprint = None
        self.copy = None           # decided at the first transfer
        self.held_on = ""


class TargetNetworkProbe(Probe):

    publishes = (TargetNetworks,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._torch = ctx.backend.name == "torch"
        self._decided = weakref.WeakKeyDictionary()   # module -> (name, trained module) or None
        self._followed = weakref.WeakKeyDictionary()  # module -> _Followed
        self._ruled_out = weakref.WeakSet()           # not copies: never measured again
        self._called = []          # candidates called without gradient this iteration
        self._seen = []            # and then scored against: seen this iteration
        self._listening = False
        self._signatures = None

    # -- finding the candidates ------------------------------------------------------------

    def attach(self):
        # a global hook makes torch.compile warn (and guard on it): a compiled model is left
        # alone, as its modules are (``compiled.py``)
        if not self._torch or module_underneath(self.ctx.backend.model) is not None:
            return []
        import torch

        hook = self.ctx.backend.shielded(self._on_module_call)
        return [torch.nn.modules.module.register_module_forward_hook(hook)]

    def begin(self):
        self._called, self._seen = [], []
        if self._torch and not self._listening:
            LOSS_CALLS.listen(self)
            self._listening = True

    def _on_module_call(self, module, args, output):
        if self.ctx.sample is None:
            return
        decided = self._decided.get(module, False)
        if decided is False:
            decided = self._decided[module] = self._candidate(module)
        if decided is None or module in self._ruled_out:
            return
        tensor = self.ctx.first_tensor(output)
        if tensor is not None and not tensor.requires_grad:
            self._called.append(module)

    def _candidate(self, module):
        """(name, trained module) when ``module`` is a copy-shaped stranger, else None."""
        if self._signatures is None:
            self._signatures = _signatures(self.ctx.backend.named_modules())
        own = {id(p.tensor) for p in self.ctx.layout.params}
        params = list(module.parameters())
        if not params or any(id(p) in own for p in params):
            return None
        held = optimizer_parameter_ids(self.ctx.optimizer) or set()
        if any(id(p) in held for p in params):
            return None
        return self._signatures.get(tuple(tuple(p.shape) for p in params))

    def loss_called(self, function, args, kwargs, result):
        """A loss scored an input with a graph against a target without one: the networks
        called without gradient before it in this iteration made (part of) that target."""
        if self.ctx.sample is None or not self._called:
            return
        target = argument(args, kwargs, 1, "target")
        prediction = argument(args, kwargs, 0, "input")
        if (getattr(prediction, "requires_grad", False) and target is not None
                and not getattr(target, "requires_grad", True)):
            self._seen.extend(m for m in self._called if m not in self._seen)
            self._called = []

    # -- measuring ---------------------------------------------------------------------------

    def on_sampled_step(self, loss):
        seen, self._seen, self._called = self._outermost(self._seen), [], []
        for module in seen:
            followed = self._followed.get(module)
            if followed is None:
                if len(self._followed) >= _FOLLOWED:
                    continue
                name, trained = self._decided[module]
                followed = self._followed[module] = _Followed(module, name, trained,
                                                              self.ctx.step)
            followed.last_step = self.ctx.step
            self._queue(module, followed)

    @staticmethod
    def _outermost(modules):
        inner = {id(sub) for m in modules for sub in m.modules() if sub is not m}
        return [m for m in modules if id(m) not in inner]

    def _queue(self, module, followed):
        import torch

        trained = followed.trained_ref()
        if trained is None:
            return
        with torch.no_grad():
            mine = [p.detach() for p in module.parameters()]
            theirs = [p.detach() for p in trained.parameters()]
            if followed.start is None:
                followed.start = [p.clone() for p in mine]
            start = followed.start

            def total(parts):
                return torch.stack([x.double().sum() for x in parts]).sum()
            stats = torch.stack([
                total((a - s).double().square() for a, s in zip(mine, start)),
                total((b - s).double().square() for b, s in zip(theirs, start)),
                total((b - a).double().square() for a, b in zip(mine, theirs)),
                total(s.double().square() for s in start),
                total(a.double() for a in mine),
                total(a.double().square() for a in mine)])
        step = self.ctx.step
        self.ctx.collector.add([stats], lambda arrays: self._receive(followed, step, arrays))

    def _receive(self, followed, step, arrays):
        moved2, online2, gap2, norm2, total, squares = (float(v) for v in arrays[0])
        fingerprint = (total, squares)
        changed = followed.fingerprint is not None and fingerprint != followed.fingerprint
        followed.fingerprint = fingerprint
        if followed.norm is None:
            followed.norm = norm2 ** 0.5
            followed.copy = gap2 ** 0.5 < 0.5 * followed.norm
            module = followed.ref()
            if not followed.copy:
                if module is not None:
                    self._ruled_out.add(module)
                    self._followed.pop(module, None)
                return
            if module is not None:      # once per network: a scan of the referrers
                followed.held_on = _held_on(module, self.ctx.backend.model)
        followed.observations.append(TargetObservation(step, moved2 ** 0.5, online2 ** 0.5,
                                                       gap2 ** 0.5, changed))

    def signals(self):
        tracks = []
        for followed in list(self._followed.values()):
            if not followed.copy or not followed.observations:
                continue
            tracks.append(TargetNetworkTrack(
                followed.type_name, followed.held_on,
                followed.trained_name, followed.trained_type, followed.norm,
                followed.parameters, followed.first_step, followed.last_step,
                tuple(followed.observations)))
        return (TargetNetworks(tuple(tracks)),) if tracks else ()

    def close(self):
        self._called, self._seen = [], []
        for followed in self._followed.values():
            followed.start = None
        if self._listening:
            self._listening = False
            LOSS_CALLS.unlisten(self)


def _signatures(named_modules):
    """Parameter shapes -> (name, module) for the watched model and its modules of two layers
    or more (outermost first, so a whole model wins over a block of the same shapes)."""
    found = {}
    for name, module in named_modules:
        params = list(module.parameters())
        layers = sum(1 for m in module.modules() if any(True for _ in m.parameters(recurse=False)))
        if params and layers >= _MIN_LAYERS:
            found.setdefault(tuple(tuple(p.shape) for p in params), (name, module))
    return found


def _held_on(module, model):
    """Where the loop's objects keep ``module``: the attribute of an object that also holds
    the watched model (``CriticTrainer.critic_target`` beside ``critic``), as
    ``<class>.<attr>``; "" when none of the model's referrers holds it."""
    import gc

    for holder in gc.get_referrers(model):
        if isinstance(holder, dict):
            owners = [o for o in gc.get_referrers(holder)
                      if getattr(o, "__dict__", None) is holder]
            attributes, owner = holder, owners[0] if owners else None
        else:
            attributes, owner = getattr(holder, "__dict__", None), holder
        if owner is None or not isinstance(attributes, dict):
            continue
        for attr, value in attributes.items():
            if value is module:
                return f"{type(owner).__name__}.{attr}"
    return ""
