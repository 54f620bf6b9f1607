"""The optimizer's learning rates, read at each view (``lr`` is the first group's)."""
from ..layout import learning_rates
from .base import Probe


class LearningRateProbe(Probe):

    def view_fields(self):
        return {"learning_rates": learning_rates(self.ctx.optimizer)}

    def fill_row(self, row, sample, view):
        if view.learning_rate is not None:
            row["lr"] = view.learning_rate
