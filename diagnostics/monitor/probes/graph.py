"""Loss tensors the user holds on to, and loss graphs kept alive through something computed
from the loss (``total = total + loss``), steps after ``step``."""
import weakref
from collections import deque

from .base import Probe

_KEPT_LOSS_AGE = 2      # a loss tensor still alive this many steps later is being held
_KEPT_LOSS_PROBES = 8   # loss tensors watched at once
_HELD_GRAPH_AGE = 4     # a loss's graph still alive this many steps later is being held (the
                        # loop's own ``loss`` variable lets go of it at the next iteration)
_HELD_GRAPH_MARKS = 8   # loss graphs marked at once, and reported at most


class GraphProbe(Probe):

    def __init__(self, ctx):
        super().__init__(ctx)
        self.kept = []            # (step, graph buffers alive) of held losses
        self.held = []            # (step, steps later) of loss graphs still alive
        self._watched = deque()   # (step, weak reference to the loss tensor)
        self._marks = deque()     # (step, GraphMark on the loss's graph node)

    def on_step(self, loss):
        """On sampled steps: keep weak references to loss tensors, and a mark on their graph's
        node, to see whether the user holds on to them; every step: look at marks now old
        enough (a weak reference each)."""
        ctx = self.ctx
        if self._marks and ctx.step - self._marks[0][0] >= _HELD_GRAPH_AGE:
            self._look_at_marks()
        if ctx.sample is None:
            return False
        if ctx.backend.is_tensor(loss) and getattr(loss, "grad_fn", None) is not None:
            self._watched.append((ctx.step, weakref.ref(loss)))
            if len(self._marks) + len(self.held) < _HELD_GRAPH_MARKS:
                mark = ctx.kernels.graph_mark(loss)
                if mark is not None:
                    self._marks.append((ctx.step, mark))
        while self._watched:
            step, ref = self._watched[0]
            if ctx.step - step < _KEPT_LOSS_AGE:
                break
            self._watched.popleft()
            tensor = ref()
            if tensor is not None and len(self.kept) < _KEPT_LOSS_PROBES:
                self.kept.append((step, bool(ctx.kernels.graph_buffers_alive(tensor))))
        return False

    def _look_at_marks(self):
        step = self.ctx.step
        while self._marks and step - self._marks[0][0] >= _HELD_GRAPH_AGE:
            marked, mark = self._marks.popleft()
            try:
                if mark.alive():
                    self.held.append((marked, step - marked))
            finally:
                mark.remove()

    def view_fields(self):
        return {"kept_losses": list(self.kept), "held_graphs": list(self.held)}

    def close(self):
        marks, self._marks = self._marks, deque()
        for _, mark in marks:
            mark.remove()
        self._watched.clear()
