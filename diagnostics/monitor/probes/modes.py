"""Model calls without gradients (evaluation passes) while some modules are in training mode.

Not counted: a model in eval mode whose only modules in training mode are dropouts. Those were
switched back on by hand after ``model.eval()``, which is Monte Carlo dropout on purpose; the
forgotten ``model.eval()`` leaves the model itself in training mode, and a batch norm in
training mode under an eval model (a ``train()`` override that skips children) still counts.
"""
from ..kinds import DROPOUT, module_kind
from .base import Probe


class ModesProbe(Probe):

    def __init__(self, ctx):
        super().__init__(ctx)
        self.passes = []    # (step, [modules in train mode]) of the first such pass
        self.count = 0

    def on_forward(self, args, kwargs, grad_enabled):
        if grad_enabled:
            return
        training = [(name, module) for name, module in self.ctx.layout.mode_modules
                    if module.training]
        if _monte_carlo_dropout(self.ctx.backend.model, training):
            return
        training = [name for name, _ in training]
        if training:
            self.count += 1
            if not self.passes:
                self.passes.append((self.ctx.step, training))

    def view_fields(self):
        return {"eval_passes": list(self.passes), "eval_pass_count": self.count}


def _monte_carlo_dropout(model, training):
    return (bool(training) and not getattr(model, "training", True)
            and all(module_kind(module) == DROPOUT for _, module in training))
