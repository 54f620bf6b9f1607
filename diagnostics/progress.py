"""``progress_bar``: a tqdm bar on stderr for long work, shown only where someone watches.

``show="auto"`` draws the bar only when stderr is a terminal, and only once the work has run
``delay`` seconds, so tests, CI logs and pipes stay quiet; ``True`` always draws it at once,
``False`` never. A bar that is not drawn costs a counter increment per update.
"""
import sys

from tqdm import tqdm

AUTO_DELAY_S = 2.0


def progress_bar(total, *, desc, show="auto", delay=AUTO_DELAY_S, mininterval=0.1):
    """A ``tqdm`` bar of ``total`` steps on stderr (cleared when closed); use it as a context
    manager or call ``close()``."""
    if show == "auto":
        visible = _is_terminal(sys.stderr)
    else:
        visible, delay = bool(show), 0.0
    return tqdm(total=total, desc=desc, file=sys.stderr, disable=not visible, leave=False,
                delay=delay, mininterval=mininterval, dynamic_ncols=True)


def _is_terminal(stream):
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
