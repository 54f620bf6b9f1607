"""An evaluation pass (model.eval(), no gradients) of every healthy setup: the Monitor replays
it (DROPOUT_IGNORES_EVAL's check), finds its two runs equal (or, with Monte Carlo dropout,
different on purpose), and the pass itself, the model and the hooks are as without the
Monitor."""
import contextlib
import dataclasses

import numpy as np
import pytest

import minigrad

from .runs import _tensors, hook_snapshot, model_state
from .setups import SETUPS, build, call

TRAIN_STEPS = 3


def _no_grad(setup):
    if setup.framework == "torch":
        import torch
        return torch.no_grad()
    return minigrad.no_grad()


def _train_then_evaluate(name, monitor=None):
    """A few training steps, then one evaluation pass on the first batch's inputs: its outputs
    as NumPy arrays, the setup, the report, the probe's signal, and whether the hooks after
    are those before."""
    from diagnostics import Monitor

    setup = build(name)
    before = hook_snapshot(setup)
    context = (Monitor(setup.model, setup.optimizer, every=setup.every) if monitor
               else contextlib.nullcontext())
    with context as watching:
        for step in range(TRAIN_STEPS):
            loss = setup.train_step(setup.model, setup.batch(step), setup.optimizer)
            if watching is not None:
                watching.step(loss)
        setup.extra.get("eval_mode", lambda model: model.eval())(setup.model)
        with _no_grad(setup):
            output = call(setup.model, setup.batch(0)[0])
        setup.model.train()
        report = watching.report() if watching is not None else None
        signal = None
        if watching is not None:
            probe = next(p for p in watching._probes
                         if type(p).__name__ == "EvalRandomnessProbe")
            signal = dataclasses.asdict(next(iter(probe.signals())))   # EvalRandomness
    arrays = [np.array(getattr(v, "data", v) if setup.framework == "minigrad"
                       else v.detach().float().cpu().numpy()) for _, v in _tensors(output)]
    return arrays, setup, report, signal, hook_snapshot(setup) == before


@pytest.mark.parametrize("name", list(SETUPS))
def test_an_evaluation_pass_is_replayed_and_changes_nothing(name):
    plain, plain_setup, _, _, _ = _train_then_evaluate(name)
    watched, setup, report, signal, hooks_kept = _train_then_evaluate(name, monitor=True)
    assert signal["checks"] == 1 and signal["error"] is None, signal
    if name.startswith("mc_dropout"):     # random on purpose: the runs differ, deliberately
        assert signal["last"]["deliberate"], signal
    else:
        assert signal["last"] is None, f"the two runs of a healthy evaluation differ: {signal}"
    assert not [f for f in report.findings if f.code == "DROPOUT_IGNORES_EVAL"]
    assert len(plain) == len(watched) and all(np.array_equal(a, b, equal_nan=True)
                                              for a, b in zip(plain, watched))
    state, plain_state = model_state(setup), model_state(plain_setup)
    assert all(np.array_equal(state[k], plain_state[k], equal_nan=True) for k in state)
    assert hooks_kept
