"""Ways into the Monitor without editing a training loop.

``TrainingWatch`` (behind ``gradhunt watch``) needs only torch. The callbacks import their
framework when first used, so ``import diagnostics.integrations`` works without them:
``GradhuntCallback`` for Lightning (extra ``lightning``), ``GradhuntTrainerCallback`` for
Hugging Face ``transformers.Trainer`` (extra ``transformers``).
"""
import importlib

from .watch import TrainingWatch

_LAZY = {"GradhuntCallback": ("lightning", "lightning"),
         "GradhuntTrainerCallback": ("huggingface", "transformers")}

__all__ = ["TrainingWatch", "GradhuntCallback", "GradhuntTrainerCallback"]


def __getattr__(name):
    """Import a callback's module, and with it its framework, only when the callback is used."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, extra = _LAZY[name]
    try:
        return getattr(importlib.import_module(f"{__name__}.{module}"), name)
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            f"{name} needs the {extra} package: pip install 'gradhunt[{extra}]' ({error})",
            name=error.name) from error
