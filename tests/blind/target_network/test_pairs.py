"""Several training schemes compute their targets with a second copy of the network that must follow the trained one: a DQN's target network (copied every N steps with `target.load_state_dict(online.state_dict())`), a BYOL/MoCo/DINO or mean-teacher EMA teacher (`p_t.mul_(m).add_(p_o, alpha=1-m)` after each step), a Polyak-averaged critic in DDPG/SAC/TD3. The copy runs under `torch.no_grad()` (or with detached outputs) and is never stepped by an optimizer, so nothing fails when its refresh is missing: the refresh call never runs (wrong condition such as `if step % N == 0` on a counter that is never incremented, or placed after a `continue`), updates a different object (`copy.deepcopy` made again, refreshed into a throwaway copy, the EMA applied to the parameters of another model), or uses a momentum of 1.0. The targets then come from the initial random network forever: the trained network learns to match a fixed random function, and the RL agent or the self-supervised model stays poor. A user must be told that the network producing the targets never changed while the trained one did, which module it is, and the fix.

Each module under this folder is a small training program written from that paragraph and the
README alone; each exposes ``EXPECTED`` and ``run(fixed=, monitor=)``. For every pair:
(1) the bug is real: the fixed twin's own quality number is clearly better than the buggy one's;
(2) the Monitor's first alarm (warning or error) on the buggy program is ``EXPECTED``;
(3) the Monitor raises no warning or error on the fixed twin.
HEALTHY programs (a network meant to stay frozen) only get test (3).

Pairs (Monitor on the trained network and its optimizer):
- dqn_chain: MLP Q-net, 12-cell corridor, Adam, plain loop; sync ``if t % 50 == 0`` on the
  per-episode step counter (episodes <= 20 steps), never runs. Greedy success 0.09 vs 1.00.
- dqn_agent_grid: deeper MLP Q-net, 6x6 grid, RMSprop, agent class with ``train_step``;
  ``sync_target`` deep-copies into a local name. Greedy success 0.11 vs 1.00.
- polyak_critic: DDPG-style critic Q(s, a) with LayerNorm, AdamW, trainer class; Polyak update
  rebinds the loop variable (``p_t = tau * p + (1 - tau) * p_t``). Q MSE vs closed form 19.7 vs
  0.34.
- mean_teacher_gru: GRU sequence regressor, semi-supervised mean teacher, Adam, trainer class;
  EMA applied to the wrong object, ``_ema_step(self.teacher, self.teacher)``. Held-out MSE
  0.67 vs 0.21.
HEALTHY: healthy_frozen_teacher: distillation from a frozen pretrained MLP teacher (no_grad,
requires_grad_(False)), student accuracy 0.966.

When written (before any check for these pairs): (1) held on all 4 pairs and (3) on all 4
fixed twins and the healthy program (no findings at all on any of them). (2) held on none:
the Monitor reported no finding at all on dqn_chain, polyak_critic and mean_teacher_gru, and on
dqn_agent_grid the buggy program itself crashed under the Monitor: while a Monitor is attached,
``copy.deepcopy(model)`` raises ``TypeError: cannot pickle 'module' object`` (it works again
after ``close()``), so the user's ``copy.deepcopy(self.q)`` in ``sync_target`` fails. A user who
refreshes a target with ``self.target = copy.deepcopy(self.q)`` (a correct, common idiom) would
hit the same crash. The whole file takes ~40-60 s of CPU.
"""
from tests.blind import pairs

MODULES = [
    "dqn_chain",
    "dqn_agent_grid",
    "polyak_critic",
    "mean_teacher_gru",
]
HEALTHY = [
    "healthy_frozen_teacher",
]
_BEFORE_THE_PERIOD = (
    "its {} steps end before TARGET_NETWORK_FROZEN judges a target that never changed (more "
    "than 10,000 optimizer steps, the Nature DQN's period, so that no published hard-copy "
    "schedule is reported before its first copy); only the 'not judged yet' info is given")
MISSED = {
    "dqn_chain": _BEFORE_THE_PERIOD.format("1,050"),
    "dqn_agent_grid": _BEFORE_THE_PERIOD.format("1,050"),
    "polyak_critic": _BEFORE_THE_PERIOD.format("700"),
}
FALSE_ALARMS = {}

RUNS = pairs.Monitored(__package__)
test_bug_is_real = pairs.each(MODULES, RUNS.bug_is_real)
test_buggy_named_at_root_cause_first = pairs.each(MODULES, RUNS.named_first, xfail=MISSED)
test_fixed_twin_quiet = pairs.each(MODULES + HEALTHY, RUNS.quiet, xfail=FALSE_ALARMS)
