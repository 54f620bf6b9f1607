"""Layers, containers and losses with torch's names, parameter names and shapes."""
from . import init
from .activation import GELU, LeakyReLU, ReLU, Sigmoid, Tanh
from .container import ModuleList, Sequential
from .linear import Linear
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss
from .module import Module
from .parameter import Parameter

__all__ = ["Module", "Parameter", "Linear", "ReLU", "LeakyReLU", "Sigmoid", "Tanh", "GELU",
           "Sequential", "ModuleList", "init", "CrossEntropyLoss", "MSELoss",
           "BCEWithLogitsLoss"]
