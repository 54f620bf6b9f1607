"""DDPG-style critic with a Polyak-averaged target, trainer class, on a linear control task.

A critic Q(s, a) (MLP with LayerNorm, AdamW) evaluates the fixed linear policy ``a = -K s`` of
a noisy 1-D system ``s' = 0.9 s + 0.5 a + 0.3 eps`` with cost ``s^2 + 0.1 a^2`` (reward its
negative), from off-policy transitions with random actions, as the critic half of DDPG does.
TD targets ``r + gamma Q_target(s', pi(s'))`` come from a target critic that the trainer should
Polyak-average toward the critic after every step (tau = 0.05). The true Q is known in closed
form (a quadratic), so the critic's error is measured exactly.

Bug: ``_soft_update`` is written with the loop variable rebound,
``p_t = tau * p + (1 - tau) * p_t``: a new tensor is made and thrown away, and the target
critic's parameters never move. The targets come from the random initial critic forever.
Fix: write into the parameter, ``p_t.copy_(tau * p + (1 - tau) * p_t)``.

Measured (held-out MSE of Q against the true Q, lower is better; the true Q spans about -2 to
-20): buggy 19.7, fixed 0.34.
"""
import copy

import torch
from torch import nn

EXPECTED = "TARGET_NETWORK_FROZEN"

GAMMA = 0.9
GAIN = 0.4           # the evaluated policy: a = -GAIN * s
NOISE = 0.3
TAU = 0.05


def policy(s):
    return -GAIN * s


def true_q(s, a):
    b = 0.9 - 0.5 * GAIN
    p = (1 + 0.1 * GAIN ** 2) / (1 - GAMMA * b ** 2)
    c = GAMMA * p * NOISE ** 2 / (1 - GAMMA)
    next_mean = 0.9 * s + 0.5 * a
    return -(s ** 2 + 0.1 * a ** 2) - GAMMA * (p * (next_mean ** 2 + NOISE ** 2) + c)


def transitions(n, gen):
    s = torch.randn(n, 1, generator=gen) * 1.2
    a = torch.rand(n, 1, generator=gen) * 2 - 1
    s2 = 0.9 * s + 0.5 * a + NOISE * torch.randn(n, 1, generator=gen)
    r = -(s ** 2 + 0.1 * a ** 2)
    return s, a, r, s2


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 64), nn.LayerNorm(64), nn.ReLU(),
                                 nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, s, a):
        return self.net(torch.cat([s, a], dim=1))


class CriticTrainer:
    def __init__(self, critic, *, fixed):
        self.critic = critic
        self.critic_target = copy.deepcopy(critic)
        self.optimizer = torch.optim.AdamW(critic.parameters(), lr=3e-3, weight_decay=1e-4)
        self.fixed = fixed

    @torch.no_grad()
    def _soft_update(self):
        for p_t, p in zip(self.critic_target.parameters(), self.critic.parameters()):
            if self.fixed:
                p_t.copy_(TAU * p + (1 - TAU) * p_t)
            else:
                p_t = TAU * p + (1 - TAU) * p_t      # bug: rebinds the name, target unchanged

    def train_step(self, s, a, r, s2):
        with torch.no_grad():
            y = r + GAMMA * self.critic_target(s2, policy(s2))
        loss = nn.functional.mse_loss(self.critic(s, a), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self._soft_update()
        return loss


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    s, a, r, s2 = transitions(20000, gen)
    trainer = CriticTrainer(Critic(), fixed=fixed)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(trainer.critic, optimizer=trainer.optimizer)

    for _ in range(700):
        idx = torch.randint(0, len(s), (128,), generator=gen)
        loss = trainer.train_step(s[idx], a[idx], r[idx], s2[idx])
        if mon is not None:
            mon.step(loss)

    s_test = torch.randn(2000, 1, generator=gen) * 1.2
    a_test = torch.rand(2000, 1, generator=gen) * 2 - 1
    with torch.no_grad():
        mse = nn.functional.mse_loss(trainer.critic(s_test, a_test), true_q(s_test, a_test)).item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": mse, "higher_is_better": False}
