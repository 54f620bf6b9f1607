"""Global switch for graph recording: ``no_grad()``, ``enable_grad()``, ``set_grad_enabled()``.

As in torch, each is a context manager and a decorator (``@no_grad`` and ``@no_grad()`` both
work), and ``set_grad_enabled(False)`` called on its own switches recording off at once.
"""
import functools
import threading

_state = threading.local()


def is_grad_enabled():
    """True when operations record a graph for backward."""
    return getattr(_state, "enabled", True)


def _set_enabled(mode):
    _state.enabled = mode


class _GradModeBlock:
    """Sets the recording mode for a ``with`` block or a decorated function, then restores it."""

    mode = True

    def __new__(cls, fn=None):
        block = super().__new__(cls)
        return block if fn is None else block(fn)

    def __enter__(self):
        self.__dict__.setdefault("_previous", []).append(is_grad_enabled())
        _set_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        _set_enabled(self._previous.pop())
        return False

    def __call__(self, fn):
        return _with_mode(self.mode, fn)


class no_grad(_GradModeBlock):
    """Disable graph recording inside the block, like ``torch.no_grad()``."""

    mode = False


class enable_grad(_GradModeBlock):
    """Re-enable graph recording inside a ``no_grad`` block."""

    mode = True


class set_grad_enabled:
    """Turn recording on or off at once; as a ``with`` block or decorator, only for its extent."""

    def __init__(self, mode):
        self.mode = bool(mode)
        self._previous = is_grad_enabled()
        _set_enabled(self.mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set_enabled(self._previous)
        return False

    def __call__(self, fn):
        _set_enabled(self._previous)
        return _with_mode(self.mode, fn)


def _with_mode(mode, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        previous = is_grad_enabled()
        _set_enabled(mode)
        try:
            return fn(*args, **kwargs)
        finally:
            _set_enabled(previous)

    return wrapper
