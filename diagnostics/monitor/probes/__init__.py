"""The Monitor's signals, one probe per file (the registry is ``PROBES``).

A probe (``base.Probe``) owns the hooks that see its signal, queues its tensors on the one
gather of a sampled step (``ctx.collector``), keeps what it needs across steps, and fills its
part of the ``WindowView``, of the history row and of the report. The Monitor only schedules
sampled steps, runs the gather, runs the checks, keeps findings and feeds the sinks.

========================  ==================================================================
probe                     signal
========================  ==================================================================
``LossProbe``             the loss of every step (history, first NaN, loss levels)
``LearningRateProbe``     the optimizer's learning rates
``InputsProbe``           the model input's statistics and the batch size
``OutputsProbe``          the output's width (classes) and prediction entropy
``ActivationsProbe``      each layer's output statistics and silent units
``UpdatesProbe``          |Δw| / |w| of each parameter across the optimizer's step
``GradientsProbe``        per-parameter gradients, stale ``.grad``, the norm, rows without
                          gradient
``ModesProbe``            passes without gradients while modules are in training mode
``GraphProbe``            loss tensors held with their autograd graph
========================  ==================================================================

How to add a signal: write ``probes/<signal>.py`` with a ``Probe`` subclass that overrides
only the moments it needs (``attach`` for hooks on sampled iterations, ``on_forward`` or
``on_step`` for every iteration, ``contribute`` to queue device results, ``finish`` to fold a
completed sample into its own state, ``columns`` and ``fill_row`` for history columns) and
returns what its check reads from ``view_fields`` as ``{"signals": {name: value}}`` (read in
the check as ``view.signals[name]``); append the class to ``PROBES``. Then write the check, a pure
``check(view) -> [Finding]`` in ``checks/<family>.py`` listed in that family's ``CHECKS``
(a new finding code also gets its line in ``diagnostics/findings.py``'s ``CODES``), and give
the code a row in docs/findings.md. tests/diagnostics/test_monitor_probes.py adds a toy
signal this way. Device statistics a probe needs go in
``monitor/kernels/`` (one method per framework) rather than in the backend protocol.
"""
from .activations import ActivationsProbe
from .base import Context, Probe
from .gradients import GradientsProbe
from .graph import GraphProbe
from .inputs import InputsProbe
from .learning_rate import LearningRateProbe
from .loss import LossProbe
from .modes import ModesProbe
from .outputs import OutputsProbe
from .updates import UpdatesProbe

PROBES = (LossProbe, LearningRateProbe, InputsProbe, OutputsProbe, ActivationsProbe,
          UpdatesProbe, GradientsProbe, ModesProbe, GraphProbe)

__all__ = ["PROBES", "Context", "Probe", "ActivationsProbe", "GradientsProbe", "GraphProbe",
           "InputsProbe", "LearningRateProbe", "LossProbe", "ModesProbe", "OutputsProbe",
           "UpdatesProbe"]
