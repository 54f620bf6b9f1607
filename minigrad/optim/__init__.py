"""Optimizers with torch's update rules: ``SGD`` and ``Adam``."""
from .adam import Adam
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam"]
