"""The same two small models on both frameworks, for tests of the backend protocol and of what
is built on it (the Monitor's kernels)."""
import torch

import minigrad


def _torch_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


def _minigrad_model():
    minigrad.manual_seed(0)
    return minigrad.nn.Sequential(minigrad.nn.Linear(3, 4), minigrad.nn.ReLU(),
                                  minigrad.nn.Linear(4, 2))


MODELS = {"torch": _torch_model, "minigrad": _minigrad_model}
