"""Layers, containers and losses with torch's names, parameter names and shapes."""
from .. import functional
from . import init
from .activation import GELU, LeakyReLU, ReLU, Sigmoid, Tanh
from .container import ModuleList, Sequential
from .conv import Conv2d
from .dropout import Dropout
from .embedding import Embedding
from .flatten import Flatten
from .linear import Linear
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from .parameter import Parameter
from .pooling import MaxPool2d

__all__ = ["Module", "Parameter", "Linear", "ReLU", "LeakyReLU", "Sigmoid", "Tanh", "GELU",
           "Sequential", "ModuleList", "init", "CrossEntropyLoss", "MSELoss",
           "BCEWithLogitsLoss", "Conv2d", "MaxPool2d", "Dropout", "BatchNorm1d", "BatchNorm2d",
           "LayerNorm", "Flatten", "Embedding", "functional"]
