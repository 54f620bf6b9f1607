"""``DiagnosticsError``: a user's mistake, reported before any work starts."""


class DiagnosticsError(ValueError, TypeError):
    """Bad input to a diagnostic. The message names the argument and what was expected.

    It is both a ``ValueError`` and a ``TypeError`` so that callers catching either see it.
    """


def require(condition, argument, expected, got=None):
    """Raise ``DiagnosticsError`` unless ``condition``:
    "<argument>: expected <expected>, got <got>"."""
    if not condition:
        detail = f", got {got}" if got is not None else ""
        raise DiagnosticsError(f"{argument}: expected {expected}{detail}")
