"""Optimizers with torch's update rules: ``SGD``, ``Adam`` and ``AdamW``."""
from .adam import Adam
from .adamw import AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
