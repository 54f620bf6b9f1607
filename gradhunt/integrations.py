"""Ways into the Monitor without editing a training loop (the objects of
``diagnostics.integrations``): ``TrainingWatch``, ``GradhuntCallback`` (Lightning) and
``GradhuntTrainerCallback`` (``transformers.Trainer``). A callback imports its framework only
when it is first used."""
from diagnostics import integrations as _integrations
from diagnostics.integrations import TrainingWatch  # noqa: F401  (eager: no framework import)

__all__ = list(_integrations.__all__)


def __getattr__(name):
    return getattr(_integrations, name)
