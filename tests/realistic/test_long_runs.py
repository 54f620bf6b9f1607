"""Long runs of the realistic setups whose loss stops falling by design: a GAN watched from
each side (its losses hover around the game's equilibrium and rise when the other player gets
better) and a VAE (its loss falls to a floor). Over 1,600-2,000 steps no warning or error may
be raised at any step, also one resolved later (``on_finding`` hears every one); the twin, the
same GAN with its discriminator frozen and its generator's learning rate too low, is still a
plateau."""
import dataclasses

import numpy as np
import pytest

from diagnostics import Monitor
from diagnostics.backends import torch_threads

from .setups import build, train

pytest.importorskip("torch")

LONG = {"gan_discriminator": 1600, "gan_generator": 1600, "vae": 2000}


def learned(setup, losses):
    """The setup's claim (G's samples moved onto the data), or for a loss that falls to a
    floor: the last 100 steps at half the first 10 steps' loss or below (the setup's own
    check compares tenths of the run, which a long run's first tenth already passes)."""
    if setup.name.startswith("gan_"):
        return setup.check(losses)
    return np.mean(losses[-100:]) < 0.5 * np.mean(losses[:10])


def raised(setup, **options):
    """Every finding raised while ``setup`` trains under a Monitor, and the final report."""
    found = []
    with torch_threads(1), Monitor(setup.model, setup.optimizer, on_finding=found.append,
                                   **options) as monitor:
        losses = train(setup, monitor=monitor)
    return found, monitor.report(), losses


@pytest.mark.parametrize("every", [None, 10], ids=["default", "every10"])
@pytest.mark.parametrize("name", list(LONG))
def test_a_long_run_raises_nothing(name, every):
    setup = dataclasses.replace(build(name), steps=LONG[name])
    found, report, losses = raised(setup, **({} if every is None else {"every": every}))
    alarms = [f for f in found if f.severity in ("warning", "error")]
    assert not alarms, "raised on a healthy long run:\n" + "\n".join(
        f"{f.code} at step {f.first_step}: {f.message}" for f in alarms) + "\n\n" + str(report)
    assert learned(setup, losses), f"{name}: {setup.claim} did not hold over {len(losses)} steps"


def test_a_gan_whose_discriminator_is_frozen_is_judged_as_any_loss():
    """The twin: D's optimizer at lr 0 moves nothing, so G's loss is G's alone; G's learning
    rate 1e-7 leaves it level: a plateau."""
    setup = dataclasses.replace(build("gan_generator"), steps=600)
    setup.extra["optimizers"]["discriminator"].param_groups[0]["lr"] = 0.0
    setup.optimizer.param_groups[0]["lr"] = 1e-7
    found, report, _ = raised(setup, every=10)
    assert "trained_elsewhere" not in report.loss
    assert "LOSS_PLATEAU" in [f.code for f in found], str(report)
