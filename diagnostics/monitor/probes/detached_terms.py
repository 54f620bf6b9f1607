"""Terms of the loss whose gradient is thrown away: a term detached from the network it trains.

The loss handed to ``Monitor.step`` is often a sum of terms (``adversarial + 100 * l1``), each
meant to train the network this optimizer steps. A term that reaches trainable parameters,
none of which this optimizer holds, while another term reaches this optimizer's (a GAN
generator's adversarial term scored on ``fake.detach()``: it reaches only the
discriminator's weights), sends this step nothing. That alone is not the mistake: a joint loss
``actor_loss + critic_loss`` back-propagated once and stepped by two optimizers has the same
shape, and there the other optimizer uses the term's gradient. The mistake is that nobody uses
it: the gradient the term wrote into the other network's ``.grad`` is cleared before any
optimizer steps that network.

So it is followed, not guessed (torch only). A sampled step splits the loss into its terms
(``kernels.loss_terms``) and takes, of each term that reaches only parameters outside this
optimizer, one of those parameters as its witness. From then on, a hook on the witness (it
fires when a backward is about to add into its ``.grad``) and a hook on every optimizer's step
(``torch.optim``'s global step pre-hook) tell what happened to the gradient the loss left in
it. At each sampled step the witness's last event is read: an optimizer step after the last
backward into it means the term's gradient was used; a backward last means it is pending, and
the next event settles it: a step that finds a gradient there uses it; a backward that finds
the ``.grad`` None or all zeros (``zero_grad`` with or without ``set_to_none``) means it was
cleared unused. A term is reported only once it was cleared unused at
``Thresholds.detached_term_verdicts`` sampled steps and never used: a second optimizer that
steps on it, gradient accumulation onto it, and a frozen network never cleared all stay
quiet (the last stays pending). A term that reaches no trainable parameter (a constant, a
term made wholly of detached values) has no graph to follow and is not judged.

The hooks stay from the first witness until the Monitor closes (at most ``_WITNESSES``
tensors, and one global step hook); they do nothing costly while no gradient is pending.
"""
import weakref
from dataclasses import dataclass

from ..layout import optimizer_parameter_ids
from .base import Probe, Signal
from .loss_calls import LOSS_CALLS

_WITNESSES = 4      # terms followed at once


@dataclass(frozen=True)
class DetachedTerm:
    """A term of the loss whose gradient went only to parameters outside this optimizer, and
    what became of it at the sampled steps it was judged."""

    term: str                 # the loss function that made it, else its graph node's label
    position: int             # its place in the sum (0: the first term)
    terms: int                # terms in the sum
    reached: str              # the witness: one of the parameters it reaches, by shape
    reached_count: int        # how many parameters it reaches
    first_step: int           # the sampled step it was first seen at
    cleared: tuple[int, ...]  # sampled steps whose gradient was cleared unused
    used: int                 # sampled steps whose gradient an optimizer step used


@dataclass(frozen=True)
class DetachedTerms(Signal):
    """The terms followed so far."""

    terms: tuple[DetachedTerm, ...]


class _Witness:
    """One parameter a term reaches, and the life of the gradient the loss leaves in it."""

    def __init__(self, tensor, key, term, position, terms, count, step, name=None):
        self.ref = weakref.ref(tensor)
        self.name = name          # its name in the watched model, if it is one of its tensors
        self.key, self.term, self.position, self.terms = key, term, position, terms
        self.count, self.first_step = count, step
        self.last = None          # "grad" or "step": the latest event on it
        self.fresh = False        # a backward reached it since the last judgement
        self.pending = None       # the sampled step whose gradient waits for a verdict
        self.cleared, self.used = [], 0
        self.handle = None


class DetachedTermsProbe(Probe):

    publishes = (DetachedTerms,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._active = ctx.optimizer is not None and ctx.backend.name == "torch"
        self._witnesses = {}      # key (term label, position) -> _Witness
        self._calls = []          # (graph node of a loss call's result, function) this iteration
        self._step_hook = None
        self._held = {}           # id(optimizer) -> (weak ref, parameter count, ids)
        self._listening = False
        self._names = {id(p.tensor): p.name for p in ctx.layout.params}

    def begin(self):
        self._calls = []
        if self._active and not self._listening:
            LOSS_CALLS.listen(self)
            self._listening = True

    def loss_called(self, function, args, kwargs, result):
        """Loss functions of a sampled iteration name the terms they made."""
        node = getattr(result, "grad_fn", None)
        if self.ctx.sample is not None and node is not None and len(self._calls) < 16:
            self._calls.append((node, function))

    def on_sampled_step(self, loss):
        calls, self._calls = self._calls, []
        if not self._active or getattr(loss, "grad_fn", None) is None:
            return
        terms = self.ctx.kernels.loss_terms(loss)
        if not terms or len(terms) < 2:
            return
        held = optimizer_parameter_ids(self.ctx.optimizer)
        trains = [any(id(leaf) in held for leaf in leaves) for _, leaves in terms]
        if not any(trains):
            return
        names = {id(node): function for node, function in calls}
        step = self.ctx.step
        for position, ((root, leaves), mine) in enumerate(zip(terms, trains)):
            if mine or not leaves:
                continue
            label = names.get(id(root)) or self.ctx.kernels.node_label(root)
            key = (label, position)
            witness = self._witnesses.get(key)
            if witness is None or witness.ref() is None:
                self._drop_gone()
                if len(self._witnesses) >= _WITNESSES:
                    continue
                witness = self._watch(key, leaves[0], label, position, len(terms),
                                      len(leaves), step)
                if witness is None:
                    continue
            self._judge(witness, step)

    def _watch(self, key, tensor, label, position, terms, count, step):
        witness = _Witness(tensor, key, label, position, terms, count, step,
                           self._names.get(id(tensor)))
        try:
            witness.handle = self.ctx.backend.add_tensor_hook(
                tensor, lambda grad, w=witness: self._on_gradient(w))
            if self._step_hook is None:
                import torch.optim.optimizer as optimizer_module
                self._step_hook = optimizer_module.register_optimizer_step_pre_hook(
                    self._on_optimizer_step)
        except (RuntimeError, AttributeError, TypeError):
            if witness.handle is not None:
                witness.handle.remove()
            return None
        self._witnesses[key] = witness
        return witness

    def _drop_gone(self):
        """Forget witnesses whose tensor is gone (a network made anew), hooks and all."""
        for key, witness in list(self._witnesses.items()):
            if witness.ref() is None:
                if witness.handle is not None:
                    witness.handle.remove()
                del self._witnesses[key]

    def _judge(self, witness, step):
        """A sampled step: what became of the gradient this step's backward left."""
        if witness.pending is not None or not witness.fresh:
            return      # hooked after this step's backward, or an earlier one still waits
        witness.fresh = False
        if witness.last == "step":
            witness.used += 1
        else:
            witness.pending = step

    def _on_gradient(self, witness):
        """A backward is about to add into the witness's ``.grad`` (its tensor hook)."""
        try:
            if witness.pending is not None:
                tensor = witness.ref()
                grad = None if tensor is None else tensor.grad
                if grad is None or not bool(grad.any()):
                    witness.cleared.append(witness.pending)
                    witness.pending = None
            witness.last, witness.fresh = "grad", True
        except Exception:     # noqa: BLE001,S110 - never into the user's backward
            pass

    def _on_optimizer_step(self, optimizer, args, kwargs):
        """Any optimizer's step is about to run (torch's global step pre-hook)."""
        try:
            for witness in tuple(self._witnesses.values()):
                if not self._holds(optimizer, witness.ref()):
                    continue
                if witness.pending is not None:
                    grad = witness.ref().grad
                    if grad is not None and bool(grad.any()):
                        witness.used += 1
                    else:
                        witness.cleared.append(witness.pending)
                    witness.pending = None
                witness.last = "step"
        except Exception:     # noqa: BLE001,S110 - never into the user's step
            pass

    def _holds(self, optimizer, tensor):
        if tensor is None:
            return False
        groups = getattr(optimizer, "param_groups", None)
        if not isinstance(groups, list):
            return False
        count = sum(len(g.get("params", ())) for g in groups if isinstance(g, dict))
        cached = self._held.get(id(optimizer))
        if cached is None or cached[0]() is not optimizer or cached[1] != count:
            try:
                ids = optimizer_parameter_ids(optimizer)
            except Exception:     # noqa: BLE001 - not an optimizer we can read
                return False
            cached = (weakref.ref(optimizer), count, ids)
            self._held[id(optimizer)] = cached
        return id(tensor) in cached[2]

    def signals(self):
        return (DetachedTerms(tuple(_record(w) for w in self._witnesses.values())),)

    def close(self):
        """Keep what was found for ``report()``; take every hook off."""
        self._calls = []
        try:
            if self._step_hook is not None:
                self._step_hook.remove()
                self._step_hook = None
            for witness in self._witnesses.values():
                if witness.handle is not None:
                    witness.handle.remove()
                    witness.handle = None
        finally:
            self._held = {}
            if self._listening:
                self._listening = False
                LOSS_CALLS.unlisten(self)


def _record(witness):
    tensor = witness.ref()
    shape = witness.name or ("a tensor gone since" if tensor is None else (
        "a tensor of shape " + ("x".join(str(s) for s in tensor.shape) or "scalar")))
    return DetachedTerm(witness.term, witness.position, witness.terms, shape, witness.count,
                        witness.first_step, tuple(witness.cleared), witness.used)
