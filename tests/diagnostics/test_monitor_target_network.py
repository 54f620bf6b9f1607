"""TARGET_NETWORK_FROZEN: a copy of the trained network computing the loss's targets under
no_grad that never follows it. Named when the refresh never runs (after more than MAX_PERIOD
steps) or runs on the wrong object; quiet for hard syncs, EMAs, a frozen pretrained teacher of
another shape, and a long-period sync observed before its first copy (an info: not judged yet).
"""
import copy

import pytest
import torch
from torch import nn

from diagnostics import Monitor
from diagnostics.monitor import Thresholds
from diagnostics.monitor.checks import target_network as check
from diagnostics.monitor.probes.target_network import (TargetNetworks, TargetNetworkTrack,
                                                       TargetObservation)


SHORT = Thresholds(target_refresh_period=1000)   # the tests' runs judge a shorter period


def _regression(steps, *, refresh, every=50, teacher_shape=None, independent=False, seed=0,
                thresholds=SHORT):
    """A TD-style regression: targets r + 0.9 * target(s'); ``refresh(target, online, t)``."""
    torch.manual_seed(seed)
    online = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 2))
    if independent:
        target = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 2))
    else:
        target = (copy.deepcopy(online) if teacher_shape is None
                  else nn.Sequential(nn.Linear(6, teacher_shape), nn.ReLU(),
                                     nn.Linear(teacher_shape, 2)).requires_grad_(False))
    optimizer = torch.optim.Adam(online.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    with Monitor(online, optimizer, every=every, thresholds=thresholds) as monitor:
        for t in range(steps):
            s, s2 = torch.randn(32, 6, generator=g), torch.randn(32, 6, generator=g)
            r = s[:, :2].sin()
            with torch.no_grad():
                y = r + 0.9 * target(s2)
            loss = nn.functional.mse_loss(online(s), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            refresh(target, online, t + 1)
            monitor.step(loss)
    return monitor.report()


def _codes(report, severity=None):
    return [f for f in report.findings if f.code == "TARGET_NETWORK_FROZEN"
            and (severity is None or f.severity == severity)]


def _never(target, online, t):
    pass


def _ema_of_itself(target, online, t):
    with torch.no_grad():
        for p_t, p in zip(target.parameters(), target.parameters()):
            p_t.mul_(0.97).add_(p, alpha=0.03)


def _ema(target, online, t):
    with torch.no_grad():
        for p_t, p in zip(target.parameters(), online.parameters()):
            p_t.mul_(0.995).add_(p, alpha=0.005)


def _hard(period):
    def refresh(target, online, t):
        if t % period == 0:
            target.load_state_dict(online.state_dict())
    return refresh


def test_a_target_never_refreshed_is_named_after_the_longest_hard_period():
    report = _regression(1300, refresh=_never)
    [finding] = _codes(report, "warning")
    assert "never changed in" in finding.message and "Sequential" in finding.message
    assert finding.evidence["steps_observed"] > SHORT.target_refresh_period
    assert finding.evidence["writes_seen"] == 0


@pytest.mark.parametrize("steps, thresholds", [(400, SHORT), (1300, None)],
                         ids=["before a short period", "before the default period"])
def test_before_the_longest_hard_period_it_is_not_judged_yet(steps, thresholds):
    """By default the Nature DQN's 10,000-update period is waited for: 1300 steps unrefreshed
    are no alarm."""
    report = _regression(steps, refresh=_never, thresholds=thresholds)
    assert [f.severity for f in _codes(report)] == ["info"]
    assert "not judged yet" in _codes(report)[0].message


def test_an_ema_of_the_target_with_itself_is_an_error_early():
    report = _regression(300, refresh=_ema_of_itself)
    [finding] = _codes(report, "error")
    assert finding.evidence["writes_seen"] >= check.MIN_WRITES
    assert "never toward" in finding.message


@pytest.mark.parametrize("refresh", [_ema, _hard(40), _hard(200)],
                         ids=["ema", "sync every 40", "sync every 200"])
def test_refreshed_targets_are_quiet(refresh):
    assert _codes(_regression(1300, refresh=refresh)) == []


def test_a_sync_every_1000_steps_observed_over_200_steps_raises_no_alarm():
    report = _regression(200, refresh=_hard(1000))
    assert all(f.severity == "info" for f in _codes(report))


def test_a_frozen_teacher_of_another_shape_is_not_followed():
    assert _codes(_regression(1300, refresh=_never, teacher_shape=64)) == []


def test_a_same_shaped_network_initialised_apart_is_not_a_copy():
    report = _regression(1300, refresh=_never, independent=True)   # a random fixed target (RND)
    assert _codes(report) == []


def test_the_check_reads_only_tracks_whose_trained_network_moved():
    track = TargetNetworkTrack("Sequential", "", "", "Sequential", 10.0, 10, 0, 1200, (
        TargetObservation(0, 0.0, 0.05, 0.05, False),
        TargetObservation(1200, 0.0, 0.5, 0.5, False)))     # moved 5% of the norm: too little
    assert check.target_network_frozen(_View(TargetNetworks((track,)))) == []
    moved = TargetNetworkTrack(*[getattr(track, f) for f in (
        "type_name", "held_on", "trained", "trained_type")], 1.0, 10, 0, 1200,
        track.observations)
    assert check.target_network_frozen(_View(TargetNetworks((moved,))))[0].severity == "warning"


def test_the_probe_leaves_no_global_hook_behind():
    modules = torch.nn.modules.module
    before = (len(modules._global_forward_hooks), len(modules._global_forward_pre_hooks))
    _regression(60, refresh=_never, every=1)
    assert (len(modules._global_forward_hooks), len(modules._global_forward_pre_hooks)) == before


class _View:
    thresholds = SHORT

    def __init__(self, signal):
        self._signal = signal

    def signal(self, kind):
        return self._signal if kind is TargetNetworks else None
