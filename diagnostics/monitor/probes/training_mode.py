"""Training steps taken with the whole model in eval mode, after it had trained in train mode.

The signal of ``model.eval()`` called for a validation pass and ``model.train()`` never
called again: gradient-enabled passes followed by ``Monitor.step`` while the model and every
mode-dependent module (dropout, batch norm) are in eval mode, after earlier training steps
had them in train mode, with the switch seen at a pass without gradients. Deliberate setups
stay out: a model trained in eval mode from the start never flips; freezing batch norm
(``backbone.eval()`` or each BN module's ``eval()``) leaves the model itself, or a dropout,
in train mode; a model without dropout or batch norm behaves the same in either mode.
"""
from dataclasses import dataclass

from .base import Probe, Signal



@dataclass(frozen=True)
class EvalModeTraining(Signal):
    """The longest run of training steps taken in eval mode: the step ``model.eval()`` came
    at, the run's first step and length, whether it still goes on, the mode-dependent
    modules."""

    switch_step: int
    first_step: int
    steps: int
    ongoing: bool
    modules: tuple[str, ...]


class TrainingModeProbe(Probe):
    publishes = (EvalModeTraining,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._model = ctx.backend.model
        self._modules = [module for _, module in ctx.layout.mode_modules]
        self._last_pass = None     # "train" / "eval": the mode of the last pass with gradients
        self._switch = None        # step of the eval pass without gradients after training
        self._run = None           # [switch step, first eval step, eval steps] of this run
        self._longest = None       # the longest run so far (a copy)
        self._this_step = set()    # modes of this iteration's passes with gradients

    def on_forward(self, args, kwargs, grad_enabled):
        if not self._modules:
            return
        off = not self._model.training and not any(m.training for m in self._modules)
        if grad_enabled:
            mode = "eval" if off else "train"
            self._this_step.add(mode)
            self._last_pass = mode
            if mode == "train":
                self._switch, self._run = None, None
        elif off and self._last_pass == "train" and self._switch is None:
            self._switch = self.ctx.step

    def on_step(self, loss):
        modes, self._this_step = self._this_step, set()
        if modes != {"eval"} or self._switch is None:
            return False
        if self._run is None:
            self._run = [self._switch, self.ctx.step, 0]
        self._run[2] += 1
        if self._longest is None or self._run[2] >= self._longest[2]:
            self._longest = list(self._run)
        return False

    def signals(self):
        if self._longest is None:
            return ()
        switch_step, first_step, steps = self._longest
        return (EvalModeTraining(
            switch_step=switch_step, first_step=first_step, steps=steps,
            ongoing=self._run is not None and self._longest == self._run,
            modules=tuple(name for name, _ in self.ctx.layout.mode_modules)),)
