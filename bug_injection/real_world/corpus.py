"""The real-world corpus: every entry, in category order."""
from . import (custom_autograd, data_pipeline, evaluation, loss, mixed_precision,
               model_definition, optimizer, training_loop)

_MODULES = (data_pipeline, model_definition, loss, optimizer, training_loop, evaluation,
            custom_autograd, mixed_precision)


def corpus():
    """All entries, data pipeline first."""
    return [entry for module in _MODULES for entry in module.ENTRIES]


def get_entry(name):
    """The entry called ``name``; ``KeyError`` listing the names otherwise."""
    for entry in corpus():
        if entry.name == name:
            return entry
    raise KeyError(f"no real-world entry called {name!r}; known: "
                   f"{', '.join(e.name for e in corpus())}")
