"""Model calls without gradients (evaluation passes) while some modules are in training mode."""
from .base import Probe


class ModesProbe(Probe):

    def __init__(self, ctx):
        super().__init__(ctx)
        self.passes = []    # (step, [modules in train mode]) of the first such pass
        self.count = 0

    def on_forward(self, args, kwargs, grad_enabled):
        if grad_enabled:
            return
        training = [name for name, module in self.ctx.layout.mode_modules if module.training]
        if training:
            self.count += 1
            if not self.passes:
                self.passes.append((self.ctx.step, training))

    def view_fields(self):
        return {"eval_passes": list(self.passes), "eval_pass_count": self.count}
