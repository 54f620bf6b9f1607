"""EXPLODING_GRADIENTS' spike rule in a game: a spike in a loss that depends on what another
optimizer trains, at a step where the loss itself rose out of its range, is the other player's
move (the gradient followed the loss); a spike at a loss that stays in its range, or in a run
with no other player, is still reported. The check is pure: it is fed views built here."""
from dataclasses import dataclass, field

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics.monitor.checks.step_gradients import gradient_spike
from diagnostics.monitor.guard import BadStep
from diagnostics.monitor.probes.other_optimizer import TrainedElsewhere
from diagnostics.monitor.probes.step_gradients import StepGradients
from diagnostics.monitor.settings import Thresholds


def _bad(step, norm=20.0, median=0.1):
    return BadStep(step=step, batches=(step, step), reason="spike", norm=norm, median=median,
                   parameter="0.weight", nonfinite=0, source=None, detail="", action="applied")


@dataclass
class _View:
    losses: np.ndarray
    bad: tuple
    elsewhere: tuple = ("generator.0.weight",)
    thresholds: Thresholds = field(default_factory=Thresholds)
    learning_rate: float = 1e-3

    def clip_value(self):
        return None

    def signal(self, kind):
        if kind is StepGradients:
            return StepGradients(steps=np.arange(self.losses.size), norms=np.ones(
                self.losses.size), latest={}, loss_scaling=False, bad=self.bad,
                bad_count=len(self.bad), guard=None, replayed=False, closure_steps=0)
        if kind is TrainedElsewhere:
            return TrainedElsewhere(self.elsewhere)
        return None


def _losses(jump_at=None, jump=60.0, steps=200, level=0.03):
    losses = level * (1 + 0.2 * np.sin(np.arange(steps, dtype=np.float64)))
    if jump_at is not None:
        losses[jump_at] = level * jump
        losses[jump_at + 1] = level * jump * 0.8      # the swing lasts a step more
    return losses


def test_a_spike_where_the_other_player_moved_the_loss_is_not_an_explosion():
    view = _View(_losses(jump_at=163), (_bad(163), _bad(164)))
    assert gradient_spike(view) == []


def test_a_spike_at_a_loss_in_its_range_is_still_reported():
    view = _View(_losses(), (_bad(163),))
    assert [f.code for f in gradient_spike(view)] == ["EXPLODING_GRADIENTS"]


def test_without_another_player_the_spike_is_reported_whatever_the_loss():
    view = _View(_losses(jump_at=163), (_bad(163),), elsewhere=())
    assert [f.code for f in gradient_spike(view)] == ["EXPLODING_GRADIENTS"]


def test_a_later_spike_at_a_steady_loss_is_reported_after_a_swing():
    view = _View(_losses(jump_at=100), (_bad(100), _bad(101), _bad(180)))
    found = gradient_spike(view)
    assert len(found) == 1 and found[0].evidence["step"] == 180


def test_a_nonfinite_loss_or_a_spike_too_early_is_not_excused():
    losses = _losses(jump_at=163)
    losses[163] = np.nan
    assert gradient_spike(_View(losses, (_bad(163),)))
    assert gradient_spike(_View(_losses(jump_at=5), (_bad(5),)))


@settings(max_examples=40, deadline=None)
@given(step=st.integers(60, 190), jump=st.floats(0.5, 500.0))
def test_excused_exactly_when_the_loss_rose_above_its_history(step, jump):
    losses = _losses(jump_at=step, jump=jump)
    before = losses[step - 50:step]
    excused = bool(losses[step] > before.max())
    assert (gradient_spike(_View(losses, (_bad(step),))) == []) is excused
