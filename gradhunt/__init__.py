"""gradhunt: find the bugs in neural-network code that never raise an error.

The import name users type. It re-exports the public API of ``diagnostics`` (the same
objects, not copies), so ``gradhunt.Monitor is diagnostics.Monitor``; the training-framework
callbacks are in ``gradhunt.integrations``. The list is ``diagnostics.__all__``: one home.
"""
import diagnostics as _diagnostics
from diagnostics import *  # noqa: F403  (the names are diagnostics.__all__)

__all__ = list(_diagnostics.__all__)
