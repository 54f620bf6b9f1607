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
``ScheduleProbe``         the learning rate of every step: its peak and how fast it fell
``ModelStructureProbe``   the module tree once: one module under several names, BatchNorm
                          momentum in another framework's convention
``FrozenNormProbe``       batch norms with frozen parameters whose running statistics move
``LossInputsProbe``       the values BCE-with-logits, KL-divergence and NLL receive
``TargetsProbe``          the targets cross-entropy and NLL score: per-class counts, ignored
                          positions inside the content, padding runs; the loss's class count
``TargetGradientsProbe``  a loss's ``target`` computed by the trained network with its graph
``TargetNetworkProbe``    a copy of the trained network that computes the loss's targets
                          without gradients (a DQN target, an EMA teacher): does it follow?
``DetachedTermsProbe``    a term of the loss whose gradient reaches only another network's
                          parameters, and is cleared there unused
``StepContractProbe``     each optimizer step's window: backward passes, clearing, clipping
``InputsProbe``           the model input's statistics and the batch size
``OutputsProbe``          the logits' width (classes) and prediction entropy
``ActivationsProbe``      each layer's output statistics (per call: ``act#2``) and silent
                          units; a compiled model's through an eager replay
``UpdatesProbe``          |Δw| / |w| of each parameter across the optimizer's step
``TravelProbe``           how far the weights moved across the loss checks' window
``GradientsProbe``        per-parameter gradients, stale ``.grad``, the norm, rows without
                          gradient
``ModesProbe``            passes without gradients while modules are in training mode
``GraphProbe``            loss tensors, or loss graphs, held across steps
``TrainingModeProbe``     training steps taken while dropout and batch norm are in eval mode
``ProbabilitiesProbe``    output rows that are probabilities, and the loss's gradient on them
``MixedPrecisionProbe``   autocast's dtype, a GradScaler's scale and its skipped steps
``EvalRandomnessProbe``   a few evaluation passes replayed twice: dropout still on in eval
                          mode (``F.dropout`` without ``training=``, a flag of its own)
``StepGradientsProbe``    the gradient norm at every step (NaN/inf, spikes); the guard
``ClippingProbe``         with a GradScaler: clipping called before ``scaler.unscale_``
``OptimizerEpsProbe``     an optimizer ``eps`` that its parameters' dtype rounds away
``UnregisteredProbe``     tensors with gradients outside the model and the optimizer that
                          never change (layers in a plain Python list)
``OtherOptimizerProbe``   tensors the loss depends on that another optimizer keeps changing
                          (a GAN's other player): the loss is a moving target
``ModelCallsProbe``       calls of the model itself: none when its forward() is called
                          directly (no module hook runs)
``NextTokenProbe``        a language model's targets (the token each position is scored
                          against) and, on a copy once, its causality
``RanksProbe``            (only in a torch.distributed job, ``monitor.distributed``)
                          fingerprints of parameters, local and reduced gradients, the input
========================  ==================================================================

How to add a signal (three files and a registration):

1. ``probes/<signal>.py``: the signal, a frozen dataclass subclassing ``Signal`` with named,
   typed fields (a record inside it a small frozen dataclass of its own, not a tuple), and a
   ``Probe`` subclass that declares it and overrides only the moments it needs::

       @dataclass(frozen=True)
       class EpsUnderflow(Signal):
           lost: tuple[LostEps, ...]

       class OptimizerEpsProbe(Probe):
           publishes = (EpsUnderflow,)          # the Monitor refuses a second publisher
           def begin(self): ...                 # measure
           def signals(self):                   # hand it to the checks
               return (EpsUnderflow(tuple(self.lost)),) if self.lost else ()

   The moments: ``attach`` for hooks on sampled iterations, ``on_forward`` or ``on_step``
   for every iteration, ``on_sampled_step`` for the loss of sampled ones only,
   ``contribute`` to queue device results on the one gather, ``finish`` to fold a completed
   sample into its own state, ``columns`` and ``fill_row`` for history columns. Append the
   class to ``PROBES`` below (its moments run in that order; ``runs_last = True`` on the class,
   with the reason, if it must run after all the others). Device
   statistics it needs go in ``monitor/kernels/`` (one method per framework), not in the
   backend protocol; its numbers go in ``settings.Thresholds``.
2. The check, in ``checks/<signal>.py`` (the probe's file name): a pure
   ``check(view) -> [Finding]`` that reads ``view.signal(EpsUnderflow)`` (None when nothing
   was published: the check stays quiet), listed in that file's ``CHECKS`` (its new finding
   code gets its line in ``diagnostics/findings.py``'s ``CODES``).
3. A row for the finding code in docs/findings.md.

tests/diagnostics/test_monitor_probes.py adds a toy signal exactly this way.
"""
from .activations import ActivationsProbe
from .base import Context, Probe, Signal
from .clipping import ClippingProbe
from .detached_terms import DetachedTermsProbe
from .eval_randomness import EvalRandomnessProbe
from .frozen_norm import FrozenNormProbe
from .gradients import GradientsProbe
from .graph import GraphProbe
from .inputs import InputsProbe
from .learning_rate import LearningRateProbe
from .loss import LossProbe
from .loss_inputs import LossInputsProbe
from .mixed_precision import MixedPrecisionProbe
from .model_calls import ModelCallsProbe
from .model_structure import ModelStructureProbe
from .modes import ModesProbe
from .next_token import NextTokenProbe
from .optimizer_eps import OptimizerEpsProbe
from .other_optimizer import OtherOptimizerProbe
from .outputs import OutputsProbe
from .probabilities import ProbabilitiesProbe
from .schedule import ScheduleProbe
from .step_contract import StepContractProbe
from .step_gradients import StepGradientsProbe
from .target_gradients import TargetGradientsProbe
from .target_network import TargetNetworkProbe
from .targets import TargetsProbe
from .training_mode import TrainingModeProbe
from .travel import TravelProbe
from .unregistered import UnregisteredProbe
from .updates import UpdatesProbe

PROBES = (LossProbe, LearningRateProbe, InputsProbe, OutputsProbe, ActivationsProbe,
          UpdatesProbe, TravelProbe, GradientsProbe, ModesProbe, GraphProbe, TrainingModeProbe,
          ProbabilitiesProbe, MixedPrecisionProbe, ScheduleProbe,
          StepContractProbe, ClippingProbe, OptimizerEpsProbe, EvalRandomnessProbe,
          UnregisteredProbe, OtherOptimizerProbe, ModelStructureProbe,
          FrozenNormProbe, LossInputsProbe, TargetsProbe, TargetGradientsProbe,
          DetachedTermsProbe, ModelCallsProbe, NextTokenProbe, TargetNetworkProbe,
          # last: its step pre-hook may set the gradients aside (the guard), after the
          # others' hooks have read them
          StepGradientsProbe)

__all__ = ["PROBES", "Context", "Probe", "Signal", "ActivationsProbe", "ClippingProbe",
           "DetachedTermsProbe", "EvalRandomnessProbe", "FrozenNormProbe", "GradientsProbe",
           "GraphProbe", "InputsProbe", "LearningRateProbe", "LossInputsProbe", "LossProbe",
           "MixedPrecisionProbe", "ModelCallsProbe", "ModelStructureProbe", "NextTokenProbe",
           "ModesProbe", "OptimizerEpsProbe", "OtherOptimizerProbe", "OutputsProbe",
           "ProbabilitiesProbe", "ScheduleProbe", "StepContractProbe", "StepGradientsProbe",
           "TargetGradientsProbe", "TargetNetworkProbe", "TargetsProbe", "TrainingModeProbe",
           "TravelProbe",
           "UnregisteredProbe", "UpdatesProbe"]
