"""``Probe``: one signal of the Monitor, ``Signal``: what a probe hands its checks, and
``Context``: what the probes of one Monitor share."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:   # the types the probes are handed; imported for the hints alone
    from ...backends.base import Backend
    from ..collector import Collector
    from ..history import History
    from ..kernels.base import GraphWalk, Kernels
    from ..layout import Layout
    from ..records import Sample
    from ..settings import Thresholds
    from ..view import WindowView


class Signal:
    """The base of what a probe hands its checks: each kind a frozen dataclass declared in
    the probe's own file (``probes/optimizer_eps.py``'s ``EpsUnderflow``), its fields named
    and typed. A probe lists the kinds it publishes in ``Probe.publishes`` (the Monitor
    refuses two probes that publish one kind) and returns their values from
    ``Probe.signals``; a check reads one with ``view.signal(EpsUnderflow)``: the value, or
    None when no probe published it at this view."""

    __slots__ = ()


@dataclass
class Context:
    """The Monitor's shared state, as its probes see it."""

    backend: Backend       # its hooks run shielded (``monitor._GuardedHooks``)
    kernels: Kernels       # the framework's statistics (``monitor.kernels``)
    layout: Layout         # which layers and parameters are watched
    collector: Collector   # the one gather of a sampled step
    history: History | None   # the loss of every step and a row per sampled step
    thresholds: Thresholds
    window: int
    optimizer: Any = None
    output: Any = None     # ``Monitor(output=...)``: where the logits are (diagnostics.outputs)
    scaler: Any = None     # the torch.amp.GradScaler the Monitor was given, if any
    loss_scaling: bool = False   # gradients may come from a scaled loss (a scaler was given,
                                 # or fp16 autocast was seen): inf/NaN ones are skipped steps
    per_step_gradients: bool = True    # the per-step tier (StepGradientsProbe)
    guard: str | None = None           # the step guard's mode (``monitor.guard``)
    guard_replay: bool = False
    max_consecutive_skips: int = 10
    report_now: Any = None   # the Monitor's report with the urgent checks run now (the guard
                             # writes it before it stops the training)
    hooks_quiet: Any = None  # a context manager: the Monitor's hooks do nothing inside it
    step: int = 0          # the iteration under way
    sample: Sample | None = None  # its ``Sample`` when it is sampled, else None
    walked: tuple | None = None   # (loss, its GraphWalk) of this step's ``on_step``, then dropped

    def loss_walk(self, loss: Any) -> GraphWalk:
        """The walk of ``loss``'s autograd graph, made once per step for every probe that
        reads it (``kernels.walk_graph``); the Monitor drops it when ``on_step`` is done."""
        walked = self.walked
        if walked is not None and walked[0] is loss:
            return walked[1]
        walk = self.kernels.walk_graph(loss)
        self.walked = (loss, walk)
        return walk

    def first_tensor(self, output: Any) -> Any:
        """``output`` itself when it is a tensor, else the first tensor of a tuple or list,
        else the first one a level down (an LSTM's ``(PackedSequence, (h, c))`` gives the
        packed ``data``)."""
        is_tensor = self.backend.is_tensor
        if is_tensor(output):
            return output
        if not isinstance(output, (tuple, list)):
            return None
        found = next((o for o in output if is_tensor(o)), None)
        if found is not None:
            return found
        inner = (i for o in output if isinstance(o, (tuple, list)) for i in o if is_tensor(i))
        return next(inner, None)


class Probe:
    """One signal: the hooks that see it, what it adds to a sampled step's one transfer, and
    its part of the view, the history row and the report. Every method is a no-op here; a
    probe overrides the moments it cares about, and the Monitor calls ``on_forward`` and
    ``on_step`` (the per-step hot path) only on probes that override them.

    Order of a sampled iteration: ``begin`` (and ``attach`` when its hooks are not on yet),
    hooks fire, ``on_step(loss)``, ``on_sampled_step(loss)``, ``contribute`` (queue on
    ``ctx.collector``), the one transfer, ``finish(sample)``, then ``signals`` and
    ``view_fields`` for the checks, and ``fill_row``.
    """

    #: the ``Signal`` kinds this probe's ``signals`` returns (no other probe may publish one)
    publishes: tuple[type[Signal], ...] = ()
    #: its moments run after every other probe's (the Monitor orders the probes by this,
    #: ``PROBES`` order otherwise); say why where it is set
    runs_last: bool = False

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def attach(self) -> Sequence[Any]:
        """Hooks for sampled iterations: a list of handles with ``remove()``; the Monitor
        removes them when an iteration that is not sampled begins, and on ``close()``."""
        return []

    def begin(self) -> None:
        """A sampled iteration begins (``ctx.sample`` is its new ``Sample``)."""

    def on_forward(self, args: tuple, kwargs: dict, grad_enabled: bool) -> None:
        """Every call of the model, sampled or not, before it runs."""

    def on_step(self, loss: Any) -> bool:
        """``Monitor.step(loss)``, every iteration. True asks for the urgent checks now."""
        return False

    def on_sampled_step(self, loss: Any) -> None:
        """``Monitor.step(loss)`` of a sampled iteration, after every probe's ``on_step``: what
        reads the loss only when sampled stays off the per-step hot path."""

    def contribute(self) -> None:
        """Queue what waits for the host on ``ctx.collector``: called before every transfer."""

    def finish(self, sample: Sample) -> None:
        """A sampled step's records are complete (after the transfer)."""

    def columns(self) -> Sequence[str]:
        """History columns this signal adds after the standard ones (``history.columns_for``)."""
        return ()

    def signals(self) -> tuple[Signal, ...]:
        """What this probe hands its checks now: values of the kinds in ``publishes``, at
        most one of each (a kind left out reads as None in the view)."""
        return ()

    def view_fields(self) -> dict[str, Any]:
        """The standard ``WindowView`` fields this probe fills (the view's docstring says
        which probe fills which); anything else goes through ``signals``."""
        return {}

    def fill_row(self, row: dict[str, Any], sample: Sample, view: WindowView) -> None:
        """Put this signal's columns of the history row into ``row``."""

    def report_fields(self) -> dict[str, Any]:
        """Keyword arguments this signal adds to ``MonitorReport.build``."""
        return {}

    def close(self) -> None:
        """Drop what the probe holds (the Monitor removes the hooks)."""


def dense(tensor: Any) -> bool:
    """Whether ``tensor`` stores every element (torch's strided layout; minigrad's always): a
    sparse COO or CSR tensor (a graph's adjacency) holds its nonzeros only."""
    layout = getattr(tensor, "layout", None)
    return layout is None or str(layout) == "torch.strided"


def floating(tensor: Any) -> bool:
    """Whether ``tensor`` has a floating dtype, torch's or NumPy's (minigrad's)."""
    flag = getattr(tensor.dtype, "is_floating_point", None)
    return bool(flag) if flag is not None else np.dtype(tensor.dtype).kind == "f"
