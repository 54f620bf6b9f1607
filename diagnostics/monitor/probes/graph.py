"""Loss tensors the user holds on to, with their autograd graph, steps after ``step``."""
import weakref
from collections import deque

from .base import Probe

_KEPT_LOSS_AGE = 2      # a loss tensor still alive this many steps later is being held
_KEPT_LOSS_PROBES = 8   # loss tensors watched at once


class GraphProbe(Probe):

    def __init__(self, ctx):
        super().__init__(ctx)
        self.kept = []            # (step, graph buffers alive) of held losses
        self._watched = deque()   # (step, weak reference to the loss tensor)

    def on_step(self, loss):
        """On sampled steps: keep weak references to loss tensors to see whether the user
        holds on to them."""
        ctx = self.ctx
        if ctx.sample is None:
            return False
        if ctx.backend.is_tensor(loss) and getattr(loss, "grad_fn", None) is not None:
            self._watched.append((ctx.step, weakref.ref(loss)))
        while self._watched:
            step, ref = self._watched[0]
            if ctx.step - step < _KEPT_LOSS_AGE:
                break
            self._watched.popleft()
            tensor = ref()
            if tensor is not None and len(self.kept) < _KEPT_LOSS_PROBES:
                self.kept.append((step, bool(ctx.kernels.graph_buffers_alive(tensor))))
        return False

    def view_fields(self):
        return {"kept_losses": list(self.kept)}
