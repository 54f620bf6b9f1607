"""TARGET_NETWORK_FROZEN: the copy of the trained network that computes the loss's targets
does not follow it (``probes/target_network.py`` finds it and measures the distances).

Two ways a refresh fails, judged on different evidence:

- it runs but does not follow (an EMA applied to the wrong object, ``_ema(teacher, teacher)``):
  the target changes between sightings, yet it is never closer to the trained network than
  where it started. Every correct refresh, hard or soft, moves the target toward the trained
  network (``load_state_dict`` makes the gap 0, ``p_t += (1 - m)(p - p_t)`` shrinks it by
  ``1 - m``), so writes seen at ``MIN_WRITES`` sampled steps that never shrank the gap are a
  refresh of something else. The schedule is observed, so no period has to be assumed: error.
- it never runs (a sync on a counter that is reset, a deep copy into a local name, a Polyak
  update that rebinds the loop variable): the target is bit for bit what it was. Here the
  refresh period is unknown, and a hard copy every N steps is frozen between copies by design,
  so a target is judged only once it stayed unchanged for more than
  ``Thresholds.target_refresh_period`` optimizer steps, the longest hard period of the
  published defaults: the Nature DQN's C = 10,000 parameter updates (SB3's 10,000 environment
  steps, Dopamine's 8,000 frames, CleanRL's 50-250 updates are shorter), so that no published
  schedule is reported before its first copy. Soft updates (Polyak, EMA) run every step or
  two. Before that it is "not judged yet" (an info). Warning: no refresh was seen at all, which
  a longer period would also explain.

Both need the trained network to have moved away from the target: by ``MIN_MOVED`` of the
target's parameter norm, so that the targets come from a network measurably different from
the one being trained (closer than that, a stale copy computes nearly the trained one's values).
"""
from ...findings import Finding
from ..probes.target_network import TargetNetworks

MIN_WRITES = 3       # sampled steps the target changed at: a refresh that runs, not one write
MIN_MOVED = 0.1      # the trained network's distance from the target, per target norm


def target_network_frozen(view):
    networks = view.signal(TargetNetworks)
    if networks is None:
        return []
    period = view.thresholds.target_refresh_period
    return [finding for track in networks.tracks for finding in _judged(track, period)]


def _judged(track, period):
    observations = track.observations
    last = observations[-1]
    moved = last.online_moved / track.norm if track.norm else 0.0
    if moved < MIN_MOVED:
        return []
    closer = any(o.gap < o.online_moved for o in observations)
    if closer:
        return []                                 # it followed at least once: refreshed
    writes = sum(o.changed for o in observations)
    steps = last.step - track.first_step
    if writes >= MIN_WRITES:
        return [_finding(track, "error", (
            f"is written at {writes} of {len(observations)} sampled steps, but never toward "
            f"the trained network: after {steps} steps it is {last.gap:.3g} from "
            f"{_trained(track)}, farther than where it started ({last.online_moved:.3g}); the "
            f"refresh runs on another object or averages the target with itself"), steps)]
    if writes:
        return []                                 # changed once or twice, by someone: unclear
    if steps <= period:
        return [_finding(track, "info", (
            f"has not changed in the {steps} steps observed so far while {_trained(track)} "
            f"moved by {moved:.0%} of its norm; not judged yet: a target copied every N steps "
            f"is frozen between copies, and it is judged after {period} steps"), steps)]
    return [_finding(track, "warning", (
        f"never changed in {steps} steps (bit for bit) while {_trained(track)} moved by "
        f"{last.online_moved:.3g} ({moved:.0%} of its norm): the targets still come from the "
        f"network as it was at step {track.first_step}"), steps)]


def _trained(track):
    name = f"'{track.trained}'" if track.trained else "the watched model"
    return f"the trained {track.trained_type} ({name})"


def _finding(track, severity, what, steps):
    held = f" (held on {track.held_on})" if track.held_on else ""
    subject = (f"the network computing the loss's targets without gradients, "
               f"{track.type_name}{held}, a copy of {_trained(track)},")
    suggestion = (
        "refresh the target network from the trained one and check that the refresh runs "
        "and changes the object the targets are computed with: a hard copy "
        "`target.load_state_dict(online.state_dict())` every N optimizer steps (on a counter "
        "that is not reset each episode), or a soft update after each step, in place, under "
        "torch.no_grad(): `for p_t, p in zip(target.parameters(), online.parameters()): "
        "p_t.mul_(m).add_(p, alpha=1 - m)`; `copy.deepcopy(online)` or `p_t = ...` make a new "
        "object and leave the target as it was. If it is meant to stay fixed (a frozen "
        "reference for a KL penalty), nothing to do")
    if severity == "info":
        suggestion = "nothing yet: " + suggestion
    return Finding(
        "TARGET_NETWORK_FROZEN", severity, track.held_on or None,
        f"{subject} {what}",
        suggestion,
        {"target": track.type_name, "held_on": track.held_on, "trained": track.trained,
         "first_step": track.first_step, "last_step": track.observations[-1].step,
         "steps_observed": steps, "target_norm": track.norm,
         "target_moved": track.observations[-1].moved,
         "trained_moved": track.observations[-1].online_moved,
         "gap": track.observations[-1].gap,
         "writes_seen": sum(o.changed for o in track.observations),
         "sightings": len(track.observations)})


CHECKS = (target_network_frozen,)
