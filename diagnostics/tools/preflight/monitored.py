"""Items that read what the Monitor found over the training steps (``Facts.watched``, the
public ``MonitorReport.findings``): activations, gradient flow, stale gradients, parameters
update, and (given ``train_step``) the mode it trains in. Each claims its finding codes; the
training steps item reports the rest."""
from __future__ import annotations

from collections.abc import Callable

from .context import Run
from .modes import mode_modules, mode_words
from .report import Outcome, first_line, judged, skipped

ACTIVATION_CODES = ("DEAD_UNITS", "SATURATED_ACTIVATIONS", "EXPLODING_ACTIVATIONS",
                    "COLLAPSED_ACTIVATIONS")
FLOW_CODES = ("VANISHING_GRADIENTS", "EXPLODING_GRADIENTS", "NO_GRADIENT")
STALE_CODES = ("STALE_GRADIENTS",)
UPDATE_CODES = ("PARAMS_NOT_UPDATING",)
MODE_CODES = ("TRAINING_IN_EVAL_MODE",)
CLAIMED_CODES = ACTIVATION_CODES + FLOW_CODES + STALE_CODES + UPDATE_CODES + MODE_CODES


def watched(codes: tuple[str, ...], healthy: str) -> Callable[[Run], Outcome]:
    """An item's check reporting the Monitor's ``codes`` findings, or ``healthy`` when none."""
    def check(run: Run) -> Outcome:
        return _monitored(run, codes, healthy)
    return check


activations = watched(ACTIVATION_CODES, "no dead, saturated, exploding or collapsed layer")
gradient_flow = watched(FLOW_CODES, "gradients reach every parameter, no vanishing or "
                                    "exploding norm")
parameters_update = watched(UPDATE_CODES, "every parameter with a gradient changed")


def stale_gradients(run: Run) -> Outcome:
    if run.train_step is None:
        return skipped("give train_step to check your loop")
    return _monitored(run, STALE_CODES, "train_step clears gradients between steps")


def training_mode(run: Run) -> Outcome:
    """TRAINING_IN_EVAL_MODE at train_step (``modes``), or the Monitor's."""
    kinds = [kind for _, _, kind in mode_modules(run.backend)]
    if not kinds:
        return _monitored(run, MODE_CODES, "no dropout or batch norm: the model's mode changes "
                                           "nothing")
    return _monitored(run, MODE_CODES, f"train_step trains with {mode_words(kinds)} in train "
                                       f"mode")


def _monitored(run: Run, codes, healthy: str) -> Outcome:
    mine = [finding for finding in run.facts.watched if finding.code in codes]
    return judged("; ".join(first_line(f) for f in mine) or healthy, mine)
