"""Evaluation passes that are random: dropout that ``model.eval()`` does not switch off.

``model.eval()`` only sets each module's ``.training``. ``F.dropout(x, p)`` (whose default is
``training=True``), a from-scratch dropout switched by a flag of its own (``self.is_training``)
or an ``nn.Dropout`` built inside ``forward`` keep dropping, and no module in train mode shows
it. So the probe replays a few evaluation passes (calls of the whole model in eval mode
without gradients: the first, then the 10th, the 100th and the 1000th) twice, on copies of
their inputs, and compares across the two runs every tensor it sees, in the order they are
made: each module's input and output and (torch) each operation's output. Dropout's mark is a
tensor with elements zero in one run and not in the other while every element non-zero in
both is equal up to one scale; the first tensor with it was made in the forward of the module
running then (of the module itself, for its output). Additive noise (a VAE sampling its
latent), a random time step or one-hot samples do not carry it and stay quiet. Monte Carlo
dropout is the user's choice and stays quiet too: a module in train mode (switched on with
``.train()`` after ``model.eval()``), or a dropout function whose training flag the calling
code writes (``F.dropout(x, p, training=True)``, ``training=self.mc``, or positionally). That
is read from the call's source (torch hands ``__torch_function__`` the default filled in),
and once such a dropout differs nothing after it is compared: what follows may derive from
it. ``F.dropout(x, p)``, its default left implicit, is the bug.

The replays run without gradients and with every hook of the model set aside (the user's and
the Monitor's: they see no extra call), inside one save and restore of the random generators
(Python, NumPy, torch CPU and CUDA, and the model's own: held by its modules, or handed to a
torch function as ``generator=``) and of the buffers, so the user's pass that follows is the
one it would have been. A pass whose arguments hold anything but tensors, plain values and
flat containers of them (a KV cache the forward appends to) is not replayed; what a replay
cannot undo is a forward that changes Python state of its own or draws from a NumPy or Python
generator that no module holds. Cost: two forward passes without gradients on at most
``MAX_CHECKS`` evaluation passes of a run, with ``SAMPLE`` entries of each of the first
``MAX_EVENTS`` tensors kept and brought to the host in one transfer; nothing on training
steps.
"""
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..compiled import input_copies, keyword_copies, module_underneath, replaying
from .base import Probe, Signal

CHECK_GROWTH = 10     # the passes checked: the first, then the 10th, 100th, ... of the run
MAX_CHECKS = 4
SAMPLE = 1024         # entries of each tensor compared
MAX_EVENTS = 4096     # tensors recorded per run (the first ones)
MIN_MASKED = 4        # elements zero in one run only, at the least, for a dropout
MIN_KEPT = 8          # elements non-zero in both runs, at the least
MIN_RATE = 0.005      # share of the non-zero elements that one run zeroes, at the least
RTOL = 1e-2           # equal up to this (relative), as nondeterministic GPU kernels allow



@dataclass(frozen=True)
class RandomEvalPass:
    """Two runs of one evaluation pass that differ: the first tensor that does (with
    dropout's mark if one has it), and the module whose forward made it."""

    step: int
    eval_pass: int               # the evaluation pass's number, counting from 1
    kind: str                    # "input" or "output" of a module, or "op"
    name: str | None             # the module ("" the model itself), or the operation
    module_type: str | None      # the module's class name (None for an operation)
    origin: str | None           # the module whose forward made it ("" the model; None: unknown)
    origin_type: str
    origin_training: bool        # that module's .training flag
    dropout: dict | None         # dropout_signature of the two tensors, or None
    deliberate: str | None       # why the randomness is the user's choice (MC dropout), or None


@dataclass(frozen=True)
class EvalRandomness(Signal):
    """Replays of evaluation passes so far: how many were checked of how many passes, what a
    replay raised (then no more are made), and what the latest check found."""

    checks: int
    passes: int
    error: str | None
    last: RandomEvalPass | None


class EvalRandomnessProbe(Probe):
    publishes = (EvalRandomness,)

    def __init__(self, ctx):
        super().__init__(ctx)
        model = ctx.backend.model
        self._target = module_underneath(model) or model   # what is replayed
        self._passes = 0           # evaluation passes seen
        self._due = 1              # the pass from which the next check is due
        self._replaying = False
        self._sampling = False     # inside _record: its own operations are not events
        self.checks = 0
        self.error = None          # what a replay raised, if one did (no further replays)
        self.last = None           # what the latest check found: a RandomEvalPass, or None

    def on_forward(self, args, kwargs, grad_enabled):
        if grad_enabled or self._target.training or self._replaying:
            return
        self._passes += 1
        if (self._passes < self._due or self.checks >= MAX_CHECKS or self.error is not None
                or not _replayable(self.ctx.backend, args, kwargs)):
            return
        self._due = self._passes * CHECK_GROWTH
        self.checks += 1
        runs = self._run_twice(args, kwargs)
        if runs is not None:
            self.last = self._judge(*runs)

    def _run_twice(self, args, kwargs):
        """The events of two replays: ``[(kind, name, shape, host array or None, training
        written)]``, or None when the user's forward raised."""
        backend, kernels, runs = self.ctx.backend, self.ctx.kernels, ([], [])
        self._replaying = True
        try:
            with backend.hooks_set_aside(), replaying(backend, self._target):
                for events in runs:
                    handles = self._recording_hooks(events)
                    try:
                        with kernels.op_recorder(
                                lambda name, output, written, events=events:
                                self._record(events, "op", name, output, written)):
                            self._target(*input_copies(backend, args),
                                         **keyword_copies(backend, kwargs))
                    finally:
                        for handle in reversed(handles):
                            handle.remove()
        except Exception as error:   # the user's forward failed on the replay: not retried
            self.error = f"{type(error).__name__}: {error}"
            return None
        finally:
            self._replaying = False
        samples = [event[3] for events in runs for event in events if event[3] is not None]
        arrays = iter(kernels.gather(samples))
        return tuple([(kind, name, shape, None if sample is None else next(arrays), written)
                      for kind, name, shape, sample, written in events] for events in runs)

    def _recording_hooks(self, events):
        backend, handles = self.ctx.backend, []
        for name, module in backend.named_modules():
            def before(module, args, kwargs, name=name):
                found = _first_tensor(backend, args)
                self._record(events, "input", name, found if found is not None else kwargs)

            def after(module, args, output, name=name):
                self._record(events, "output", name, output)
            handles.append(backend.add_forward_pre_hook(module, before, with_kwargs=True))
            handles.append(backend.add_forward_hook(module, after))
        return handles

    def _record(self, events, kind, name, value, written=None):
        """One event: a module's input or output (always, to follow the calls), or an
        operation's floating output (``written``: a dropout whose training flag the user's
        code wrote); the operations of the sampling itself are not events."""
        if self._sampling or len(events) >= MAX_EVENTS:
            return
        self._sampling = True
        try:
            tensor = _first_tensor(self.ctx.backend, value)
            sample = None if tensor is None else self.ctx.kernels.value_sample(tensor,
                                                                             limit=SAMPLE)
            if sample is not None or kind != "op":
                shape = None if tensor is None else tuple(tensor.shape)
                events.append((kind, name, shape, sample, written))
        finally:
            self._sampling = False

    def _judge(self, first, second):
        """What the two runs say: None when they agree; else the first tensor with dropout's
        mark (or, without one, the first that differs) and where it was made."""
        difference = first_difference(first, second)
        if difference is None:
            return None
        modules = dict(self.ctx.backend.named_modules())
        origin = modules.get(difference.origin)
        is_module = difference.kind != "op"
        origin_training = bool(getattr(origin, "training", False))
        deliberate = None          # why the randomness is the user's choice (MC dropout)
        if difference.deliberate:
            deliberate = "training flag written in the call"
        elif origin_training and difference.dropout is not None:
            deliberate = "module in train mode in a model in eval mode (switched on)"
        return RandomEvalPass(
            step=self.ctx.step, eval_pass=self._passes, kind=difference.kind,
            name=self._display(difference.name, modules) if is_module else difference.name,
            module_type=type(modules.get(difference.name)).__name__ if is_module else None,
            origin=self._display(difference.origin, modules),
            origin_type=type(origin).__name__, origin_training=origin_training,
            dropout=difference.dropout, deliberate=deliberate)

    def _display(self, name, modules):
        """The module's name, "" for the model itself (a compiled model's module underneath
        too), None when unknown."""
        return "" if name is not None and modules.get(name) is self._target else name

    def signals(self):
        return (EvalRandomness(checks=self.checks, passes=self._passes, error=self.error,
                               last=self.last),)


@dataclass(frozen=True)
class Difference:
    """A tensor that differs between two runs of one forward."""

    kind: str                # "input" or "output" of a module, or "op" (an operation's output)
    name: str                # the module, or the operation
    origin: str | None       # the module whose forward code made it (None: unknown)
    dropout: dict | None     # dropout_signature of the two tensors, or None
    deliberate: bool = False  # made by a dropout whose training flag the user's code wrote


def first_difference(first, second):
    """The first event of two runs (a module's input or output, an operation's output, in the
    order they ran) whose tensors differ with dropout's mark, else the first that differs at
    all, else None. Where it was made: in the forward of the module that was running (an
    operation's output, a module's input), or of the module itself (its output). After the runs
    take different paths, or after a dropout whose training flag the user's code wrote differs
    (Monte Carlo dropout: what follows may derive from it), nothing more is compared."""
    running, differing = [], None
    for (kind, name, shape, a, written), (kind_b, name_b, shape_b, b, _) in zip(first, second):
        if (kind, name) != (kind_b, name_b):          # another path through the model
            return differing or Difference(kind, name, None, None)
        caller = running[-1] if running else None
        if kind == "input":
            running.append(name)
        elif kind == "output" and running:
            running.pop()
        if shape != shape_b or (a is None) != (b is None):
            return differing or Difference(kind, name, None, None)
        if a is None or not differs(a, b):
            continue
        origin = name if kind == "output" else caller
        signature = dropout_signature(a, b)
        if written:
            return differing or Difference(kind, name, origin, signature, deliberate=True)
        if signature is not None:
            return Difference(kind, name, origin, signature)
        differing = differing or Difference(kind, name, origin, None)
    return differing


def differs(a, b):
    """True when two samples of one tensor differ beyond rounding: in which elements are
    finite, in which are zero (at least ``MIN_MASKED``), or in value by more than ``RTOL``
    of the largest."""
    finite = np.isfinite(a)
    if not np.array_equal(finite, np.isfinite(b)):
        return True
    a, b = a[finite], b[finite]
    if np.count_nonzero((a == 0) != (b == 0)) >= MIN_MASKED:
        return True
    largest = max(np.abs(a).max(initial=0.0), np.abs(b).max(initial=0.0))
    return bool(np.abs(a - b).max(initial=0.0) > RTOL * largest)


def dropout_signature(a, b):
    """Dropout's mark on two runs' samples of one tensor, or None: elements zero in one run
    and not in the other, at a rate of at least ``MIN_RATE``; every element non-zero in both
    equal up to one positive scale (inverted dropout scales both runs alike), and these not
    all of one magnitude (one-hot or 0/1 samples are not dropout). ``rate`` is the share of
    the non-zero elements of one run that the other run zeroed (dropout's ``p``)."""
    finite = np.isfinite(a) & np.isfinite(b)
    a, b = a[finite], b[finite]
    zero_a, zero_b = a == 0, b == 0
    only_a, only_b = np.count_nonzero(zero_a & ~zero_b), np.count_nonzero(zero_b & ~zero_a)
    both = ~zero_a & ~zero_b
    kept = np.count_nonzero(both)
    if only_a + only_b < MIN_MASKED or kept < MIN_KEPT:
        return None
    rate = (only_a / np.count_nonzero(~zero_b) + only_b / np.count_nonzero(~zero_a)) / 2
    kept_a, kept_b = a[both], b[both]
    scale = float(np.median(kept_a / kept_b))
    magnitude = np.abs(kept_a)
    if (rate < MIN_RATE or not scale > 0
            or np.any(np.abs(kept_a - scale * kept_b) > RTOL * magnitude)
            or np.ptp(magnitude) <= RTOL * magnitude.max()):
        return None
    return {"rate": float(rate), "zeroed": int(only_a + only_b), "kept": int(kept),
            "compared": int(a.size), "scale": scale}


def _replayable(backend, args, kwargs):
    """True when every argument is a tensor, a plain value, or a tuple, list or dict of those
    (what ``input_copies`` copies): a replay cannot change them. Anything else (a KV cache the
    forward appends to, an iterator) is left alone."""
    def plain(value):
        return value is None or isinstance(value, (bool, int, float, str)) \
            or backend.is_tensor(value)

    def fits(value):
        if isinstance(value, dict):
            return all(plain(v) for v in value.values())
        if type(value) in (tuple, list):
            return all(plain(v) for v in value)
        return plain(value)
    return all(fits(v) for v in args) and all(fits(v) for v in kwargs.values())


def _first_tensor(backend, value):
    """``value`` when it is a tensor, else the first tensor in it, one level down (a tuple or
    list, a dict's values: a model output's fields)."""
    if backend.is_tensor(value):
        return value
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return next((v for v in value if backend.is_tensor(v)), None)
    return None
