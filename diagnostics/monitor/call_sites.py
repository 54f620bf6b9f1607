"""What the user's code wrote at a call, read from its source: whether an argument was given
or left to its default. A framework's dispatch fills the defaults in (``F.dropout`` hands
``training=True`` to ``__torch_function__`` whether or not the caller wrote it), so only the
caller's source tells ``F.dropout(x, p)`` from ``F.dropout(x, p, training=True)``.
"""
import ast
import functools
import linecache
import sys


def caller(skip_code=None, skip_modules=()):
    """The frame of the code that made the call being handled: the first frame above the
    function calling this one that is not ``skip_code``'s nor in a module named in
    ``skip_modules`` (the framework's dispatch)."""
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code is skip_code
                                 or frame.f_globals.get("__name__") in skip_modules):
        frame = frame.f_back
    return frame


def argument_written(frame, callee, name, position):
    """Whether the call of ``callee`` (a name) that ``frame`` is making writes the argument
    ``name``, as ``name=`` or as the positional argument at ``position``: True or False, or
    None when the call cannot be read (no source, or arguments unpacked with ``*``, ``**``)."""
    code = frame.f_code
    linecache.getlines(code.co_filename, frame.f_globals)   # a module's loader may hold it
    if hasattr(code, "co_positions"):
        return _written(code, frame.f_lasti, None, name, position)
    return _written(code, frame.f_lineno, callee, name, position)   # Python 3.10


@functools.lru_cache(maxsize=256)
def _written(code, where, callee, name, position):
    call = _call_at(code, where, callee)
    if call is None or any(isinstance(a, ast.Starred) for a in call.args) \
            or any(k.arg is None for k in call.keywords):
        return None
    return len(call.args) > position or any(k.arg == name for k in call.keywords)


def _call_at(code, where, callee):
    """The call expression at instruction offset ``where`` of ``code`` (by its columns); on
    Python 3.10, the one call of ``callee`` spanning line ``where``."""
    calls = _calls(code.co_filename, "".join(linecache.getlines(code.co_filename)))
    if callee is None:
        positions = list(code.co_positions())
        span = positions[where // 2] if where // 2 < len(positions) else None
        found = [c for c in calls
                 if (c.lineno, c.end_lineno, c.col_offset, c.end_col_offset) == span]
    else:
        found = [c for c in calls if c.lineno <= where <= c.end_lineno
                 and getattr(c.func, "attr", getattr(c.func, "id", None)) == callee]
    return found[0] if len(found) == 1 else None


@functools.lru_cache(maxsize=16)
def _calls(filename, source):
    """Every call expression in ``source`` (the file ``filename`` holds)."""
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return []
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
