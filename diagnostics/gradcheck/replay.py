"""``Replay``: a perturbed run recomputes only what the perturbation can change.

A perturbation at a module boundary, or in the parameters of module M, changes nothing the
forward pass computed before it. A keeping run stores a copy of every module call's output,
where the call ended, and the state of the random generators at that moment. In a replaying
run, a module call that ended before the perturbation returns a fresh copy of its stored output
instead of running (its sub-modules are not called at all), and the generators are put where
they stood after it, so a dropout later in the run draws the same mask. Only the suffix from
the perturbed module on is computed: on a chain of equal blocks, half a forward pass on average.

The store holds copies taken when a call ends, so an in-place operation later in the run
(``ReLU(inplace=True)``) does not reach it. A replayed torch tensor is handed out as it is, and
put back from a second copy after the run if its version counter says it was changed in place
(most are only read, and copying every replayed activation would cost as much as the layers it
saves); other tensors are handed out as copies. A replayed run is
an optimisation the caller must be able to do without: the prober measures again on a full
run whatever a replayed run says that disagrees with the backward pass (a parameter read
outside its module, state kept between calls), so such a model costs time, never a verdict.
"""
_MISSING = object()


class Replay:
    """Wraps the ``forward`` of every module of the (copied) model; see the module docstring.

    ``instrument``: the ``Instrument`` whose forward pre-hook names each call just before its
    ``forward`` runs (``current_call``) and counts the calls (``call_counts``).
    """

    def __init__(self, backend, instrument):
        self.backend, self.instrument = backend, instrument
        self.calls_run = 0        # module forwards executed in replaying runs
        self.calls_replayed = 0   # module forwards answered from the store
        self._wrapped = []        # (module, its own forward attribute or _MISSING)
        self._kept = {}           # (module, call) -> _Kept
        self._handed = []         # _Kept entries handed out in this run
        self._begins, self._ends = {}, {}
        self._events = 0
        self._mode = None         # None, "keep" or "replay"
        self._moment = None       # replay the calls that ended before this event

    def __enter__(self):
        for name, module in self.backend.named_modules():
            own = vars(module).get("forward", _MISSING)
            try:
                module.forward = self._wrap(name, module.forward)
            except (AttributeError, TypeError):   # a module that refuses (a scripted one)
                continue
            self._wrapped.append((module, own))
        return self

    def __exit__(self, *exc):
        for module, own in self._wrapped:
            if own is _MISSING:
                vars(module).pop("forward", None)
            else:
                module.forward = own
        self._wrapped, self._kept = [], {}
        return False

    # ---------------------------------------------------------------- passes
    def keep(self):
        """The next run stores every call's output (a plain, unperturbed run)."""
        self._mode, self._events = "keep", 0
        self._kept, self._begins, self._ends = {}, {}, {}

    def start(self, *, before=None, after=None):
        """The next run replays the calls that ended before call ``before`` began (a
        perturbation of its inputs or parameters), or those that ended by the end of call
        ``after`` (a perturbation of its output), calls being ``(module name, call)``; a full
        run when the store does not know the call."""
        self._mode, self._moment = None, None
        if before is not None:
            self._moment = self._begins.get(before)
        elif after is not None and after in self._ends:
            self._moment = self._ends[after] + 0.5    # the call itself is replayed too
        if self._moment is not None:
            self._mode = "replay"

    def stop(self):
        """End of a run: stored values changed in place by the run are put back."""
        for kept in self._handed:
            kept.restore()
        self._handed = []
        self._mode, self._moment = None, None

    # -------------------------------------------------------------- wrapping
    def _wrap(self, name, forward):
        def replayable_forward(*args, **kwargs):
            call = self.instrument.current_call()
            if self._mode is None or call is None or call[0] != name:
                return forward(*args, **kwargs)    # called as .forward(), not through hooks
            if self._mode == "replay":
                if call in self._kept and self._ends[call] < self._moment:
                    return self._replayed(call)
                self.calls_run += 1
                return forward(*args, **kwargs)
            self._events += 1
            self._begins[call] = self._events
            output = forward(*args, **kwargs)
            self._events += 1
            self._ends[call] = self._events
            self._keep(call, output)
            return output
        return replayable_forward

    def _keep(self, call, output):
        items, rebuild = _tensor_items(output)
        if items is None:
            return    # a dict, a dataclass: this call always runs
        self._kept[call] = _Kept(items, rebuild, self.instrument.call_counts(),
                                 self.backend.rng_state())

    def _replayed(self, call):
        kept = self._kept[call]
        self.instrument.set_call_counts(kept.counts)
        self.backend.set_rng_state(kept.rng)
        self.calls_replayed += 1
        self._handed.append(kept)
        return kept.hand_out()


class _Kept:
    """One call's output: values to hand out, pristine copies, and their version counters."""

    def __init__(self, items, rebuild, counts, rng):
        self.values = [_copy(value) for value in items]
        self.pristine = [_copy(value) if _versioned(value) else None for value in self.values]
        self.versions = [_version(value) for value in self.values]
        self.rebuild, self.counts, self.rng = rebuild, counts, rng

    def hand_out(self):
        return self.rebuild([value if _versioned(value) else _copy(value)
                             for value in self.values])

    def restore(self):
        for position, (value, pristine) in enumerate(zip(self.values, self.pristine)):
            if pristine is not None and _version(value) != self.versions[position]:
                value.copy_(pristine)
                self.versions[position] = _version(value)


def _tensor_items(values):
    """``(values, rebuild)`` for a tensor or a plain tuple/list of values holding tensors."""
    if _is_tensor(values):
        return [values], lambda new: new[0]
    if type(values) in (tuple, list) and any(_is_tensor(v) for v in values):
        return list(values), type(values)
    return None, None


def _copy(value):
    return value.detach().clone() if _is_tensor(value) else value


def _versioned(value):
    return _is_tensor(value) and hasattr(value, "_version") and hasattr(value, "copy_")


def _version(value):
    return getattr(value, "_version", None)


def _is_tensor(value):
    return hasattr(value, "register_hook") and hasattr(value, "shape") and hasattr(
        value, "clone")
