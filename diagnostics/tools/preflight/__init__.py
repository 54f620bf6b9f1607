"""``preflight``: the checklist to run before a long training run, as code.

Each item is PASS, FAIL or SKIP, with findings: the parameters (the optimizer's must be the
model's, with an eps their dtype can hold: EPS_UNDERFLOWS), the forward pass, label dtype
and range (LABEL_DTYPE, checked before the framework raises), output/target shapes that would
broadcast silently (SHAPE_BROADCAST), the loss at init against that of an uninformative output
(-log(1/C) for C classes; BAD_INIT_LOSS), overfitting one batch (OVERFIT_FAILED), a few
training steps with the loss going down, and, watched by a ``Monitor`` over those steps,
activation statistics, gradient flow, STALE_GRADIENTS (with the user's ``train_step``) and
PARAMS_NOT_UPDATING; a gradient check on a small slice of the batch; last, what one batch
can show about the model and the labels: example i's output depends only on example i's
input (BATCH_MIXING; with ``causal=True``, position t only on positions <= t,
CAUSALITY_LEAK), no view or reshape moves axes where a permute was meant (torch, one forward;
VIEW_SCRAMBLES_AXES), output units the labels never use (LABEL_RANGE) and labels sorted by class
(LABELS_SORTED).

The package: ``runner`` (``preflight()``, ``Item``: runs the table, stamps each item's name on
its outcome), ``table`` (the ordered rows), ``facts`` (what items pass on, typed), ``context``
(``Run``: what items read), ``report`` (``CheckItem``, ``PreflightReport``, ``Outcome``), and one
file per item group: ``structure``, ``targets``, ``loss``, ``training``, ``monitored``,
``gradients``, ``one_batch``. ``command`` is ``gradhunt preflight FILE:factory``.
"""
from .report import CheckItem, PreflightReport
from .runner import preflight

__all__ = ["preflight", "PreflightReport", "CheckItem"]
