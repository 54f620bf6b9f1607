"""Global switch for graph recording: ``no_grad()``, ``enable_grad()``, ``set_grad_enabled()``."""
import functools
import threading

_state = threading.local()


def is_grad_enabled():
    """True when operations record a graph for backward."""
    return getattr(_state, "enabled", True)


class set_grad_enabled:
    """Context manager (and decorator) that turns graph recording on or off."""

    def __init__(self, mode):
        self.mode = bool(mode)
        self._previous = []

    def __enter__(self):
        self._previous.append(is_grad_enabled())
        _state.enabled = self.mode
        return self

    def __exit__(self, *exc):
        _state.enabled = self._previous.pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.mode):
                return fn(*args, **kwargs)

        return wrapper


class no_grad(set_grad_enabled):
    """Disable graph recording inside the block, like ``torch.no_grad()``."""

    def __init__(self):
        super().__init__(False)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with no_grad():
                return fn(*args, **kwargs)

        return wrapper


class enable_grad(set_grad_enabled):
    """Re-enable graph recording inside a ``no_grad`` block."""

    def __init__(self):
        super().__init__(True)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with enable_grad():
                return fn(*args, **kwargs)

        return wrapper
