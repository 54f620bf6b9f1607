"""How often the model itself was called: a model whose ``forward`` the script calls directly
(``layer.forward(x)``, as forward-forward nets do) runs no module hook, so every signal read
by a hook on its modules is missing while its gradients and updates, read on its tensors,
still arrive. Python counters only."""
from dataclasses import dataclass

from .base import Probe, Signal


@dataclass(frozen=True)
class ModelCalls(Signal):
    """Calls of the model (through ``model(...)``) and ``Monitor.step`` calls so far."""

    calls: int
    steps: int


class ModelCallsProbe(Probe):

    publishes = (ModelCalls,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.calls = self.steps = 0

    def on_forward(self, args, kwargs, grad_enabled):
        self.calls += 1

    def on_step(self, loss):
        self.steps += 1
        return False

    def signals(self):
        return (ModelCalls(self.calls, self.steps),)
