"""Module hooks that a copy of the model does not inherit.

torch keeps a module's hooks in its ``_forward_pre_hooks`` and ``_forward_hooks`` dicts, and
``copy.deepcopy(model)``, ``pickle`` and ``torch.save(model)`` copy those dicts with the
module. A hook that is a bound method or a closure over a Monitor would then deep-copy the
Monitor (and fail on the torch module it holds: "cannot pickle 'module' object"), or make
the copy call the Monitor as if it were the model: a target network refreshed with
``copy.deepcopy(online)`` would be watched as the online one. ``NotCopied`` wraps the hook: a
copy gets an inert stand-in (deepcopy), and so does a pickle (loaded, it does nothing).
"""


class NotCopied:
    """``hook`` itself when called; an inert hook in a copy or a pickle of its module."""

    __slots__ = ("hook",)

    def __init__(self, hook):
        self.hook = hook

    def __call__(self, *args, **kwargs):
        return self.hook(*args, **kwargs)

    def __deepcopy__(self, memo):
        return INERT

    def __copy__(self):
        return INERT

    def __reduce__(self):
        return (_inert, ())


class _Inert:
    """A hook that does nothing (returns None: the module's inputs and output unchanged)."""

    __slots__ = ()

    def __call__(self, *args, **kwargs):
        return None

    def __reduce__(self):
        return (_inert, ())


INERT = _Inert()


def _inert():
    return INERT
