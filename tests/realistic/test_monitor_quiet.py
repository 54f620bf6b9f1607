"""The Monitor on healthy realistic runs: quiet, and training bit for bit as without it."""
import numpy as np
import pytest

from .runs import cases, first_line, monitored_run, plain_run
from .setups import SETUPS, active_alarms, build


@pytest.mark.parametrize("name", list(SETUPS))
def test_setup_does_what_it_claims(name):
    """The plain run learns as its claim says (else a quiet Monitor would prove nothing)."""
    losses, _, held = plain_run(name)
    assert held, f"{name}: {build(name).claim} did not hold; losses {losses[0]:.4g} -> " \
                 f"{losses[-1]:.4g}"


@pytest.mark.parametrize("name", cases("monitor"))
def test_monitor_raises_no_warning_or_error(name):
    run = monitored_run(name)
    alarms = active_alarms(run.findings)
    assert not alarms, "false alarms on a healthy run:\n" + "\n".join(map(first_line, alarms)) \
        + "\n\n" + run.report


@pytest.mark.parametrize("name", cases("sees"))
def test_monitor_sees_every_layer_and_the_logits(name):
    """A blind spot must not pass for quiet: every layer listed has statistics, and the loss
    checks read the classes off the logits (not off features, and not switched off)."""
    run = monitored_run(name)
    assert not run.unseen, f"layers without statistics: {run.unseen}"
    assert run.classes == build(name).classes, \
        f"the loss checks read {run.classes} classes; the logits have {build(name).classes}"


@pytest.mark.parametrize("name", cases("identical"))
def test_training_is_bit_identical_with_the_monitor(name):
    run = monitored_run(name)
    losses, state, _ = plain_run(name)
    assert run.losses == losses, "the losses differ with the Monitor attached"
    assert state.keys() == run.state.keys()
    changed = [k for k in state if state[k].dtype != run.state[k].dtype
               or not np.array_equal(state[k], run.state[k])]
    assert not changed, f"parameters/buffers differ with the Monitor attached: {changed}"
