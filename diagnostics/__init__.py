"""gradhunt diagnostics: one layer that inspects minigrad and torch models alike."""
from .tools import find_lr, overfit_one_batch, revive_dead_units, validate_data
