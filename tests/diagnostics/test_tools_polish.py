"""What a new user ran into: the tools trust the user's callables, never crash on user code,
and say what they did not check."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from diagnostics import find_lr


class _TwoInputs(nn.Module):
    """forward(x, scale): a model taking two positional inputs."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, scale):
        return self.fc(x) * scale


def _classification(rows=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 4, generator=g)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long()


def test_find_lr_passes_a_tuple_of_positional_inputs():
    torch.manual_seed(0)
    x, y = _classification()
    result = find_lr(_TwoInputs(), F.cross_entropy, ((x, torch.ones(32, 1)), y), steps=20,
                     progress=False)
    assert result.error is None and result.passed and result.suggestion > 0


def test_find_lr_turns_an_exception_in_forward_into_a_failed_result():
    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            raise RuntimeError("shape mismatch in my layer")

    x, y = _classification()
    result = find_lr(Broken(), F.cross_entropy, (x, y), steps=10, progress=False)
    assert not result.passed and result.suggestion is None
    assert "RuntimeError: shape mismatch in my layer" in result.error
    assert "FAILED" in str(result) and result.to_dict()["error"] == result.error
