"""gradhunt diagnostics: one layer that inspects minigrad and torch models alike."""
