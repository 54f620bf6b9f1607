"""DQN on a self-written 12-state chain corridor, plain loop, target synced on the episode clock.

The agent walks a corridor of 12 cells (one-hot observation, actions left/right); reaching the
right end pays +1 and ends the episode, every other step pays 0, episodes are cut at 20 steps.
A 2-layer MLP Q-network learns from a replay buffer with Adam; the TD targets come from a target
network that should be copied from the online one every 50 environment steps.

Bug: the sync is written ``if t > 0 and t % TARGET_SYNC == 0`` with ``t`` the step counter of
the *episode* (reset to 0 at every reset), and no episode lasts 50 steps, so
``target.load_state_dict(q_net.state_dict())`` never runs: the targets come from the random
initial network for the whole run. Fix: count environment steps globally (``total_steps``).

Measured (greedy-policy success rate from every start cell, higher is better): buggy 0.38,
fixed 1.00.
"""
import copy
import random

import torch
from torch import nn

EXPECTED = "TARGET_NETWORK_FROZEN"

N_CELLS = 12
MAX_T = 20
GAMMA = 0.9
TARGET_SYNC = 50
TOTAL_STEPS = 1400
BATCH = 32


class Corridor:
    """Cells 0..N-1; the goal is cell N-1. Starts anywhere left of the goal."""

    def __init__(self, rng):
        self.rng = rng
        self.pos = 0

    def reset(self, start=None):
        self.pos = self.rng.randrange(N_CELLS - 1) if start is None else start
        return self._obs()

    def _obs(self):
        obs = torch.zeros(N_CELLS)
        obs[self.pos] = 1.0
        return obs

    def step(self, action):
        self.pos = max(0, min(N_CELLS - 1, self.pos + (1 if action == 1 else -1)))
        done = self.pos == N_CELLS - 1
        return self._obs(), (1.0 if done else 0.0), done


def success_rate(q_net):
    env = Corridor(random.Random(0))
    wins = 0
    for start in range(N_CELLS - 1):
        obs = env.reset(start)
        for _ in range(MAX_T):
            with torch.no_grad():
                action = int(q_net(obs).argmax())
            obs, _, done = env.step(action)
            if done:
                wins += 1
                break
    return wins / (N_CELLS - 1)


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    rng = random.Random(1)
    env = Corridor(rng)
    q_net = nn.Sequential(nn.Linear(N_CELLS, 64), nn.ReLU(), nn.Linear(64, 2))
    target = copy.deepcopy(q_net)
    optimizer = torch.optim.Adam(q_net.parameters(), lr=1e-3)
    buffer = []

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(q_net, optimizer=optimizer)

    obs, t = env.reset(), 0
    for total_steps in range(1, TOTAL_STEPS + 1):
        epsilon = max(0.1, 1.0 - total_steps / 700)
        if rng.random() < epsilon:
            action = rng.randrange(2)
        else:
            with torch.no_grad():
                action = int(q_net(obs).argmax())
        next_obs, reward, done = env.step(action)
        buffer.append((obs, action, reward, next_obs, float(done)))
        buffer = buffer[-5000:]
        obs, t = next_obs, t + 1
        if done or t >= MAX_T:
            obs, t = env.reset(), 0

        if len(buffer) >= 100:
            batch = rng.sample(buffer, BATCH)
            s = torch.stack([b[0] for b in batch])
            a = torch.tensor([b[1] for b in batch])
            r = torch.tensor([b[2] for b in batch])
            s2 = torch.stack([b[3] for b in batch])
            d = torch.tensor([b[4] for b in batch])
            with torch.no_grad():
                td_target = r + GAMMA * (1 - d) * target(s2).max(1).values
            q = q_net(s).gather(1, a[:, None]).squeeze(1)
            loss = nn.functional.smooth_l1_loss(q, td_target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(loss)

        clock = total_steps if fixed else t     # bug: t is the episode's step, reset each episode
        if clock > 0 and clock % TARGET_SYNC == 0:
            target.load_state_dict(q_net.state_dict())

    metric = success_rate(q_net)
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": metric, "higher_is_better": True}
