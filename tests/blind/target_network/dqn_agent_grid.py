"""DQN agent class with ``train_step`` on a self-written 6x6 grid world, RMSprop, batch 64.

The agent starts in a random free cell of a 6x6 grid and must reach the bottom-right corner
(+1, episode ends; each move costs -0.01; episodes cut at 30 moves). Observation: the (row, col)
position scaled to [0, 1] plus a one-hot of the row and of the column. ``DQNAgent.train_step``
does one replay update and calls ``self.sync_target()`` every 40 updates.

Bug: ``sync_target`` makes a fresh copy into a local name, ``target = copy.deepcopy(self.q)``,
instead of refreshing ``self.target``: the copy is thrown away when the method returns and the
TD targets keep coming from the random initial network. Fix:
``self.target.load_state_dict(self.q.state_dict())``.

Measured (greedy-policy success rate from every free cell, higher is better): buggy 0.11,
fixed 1.00.
"""
import copy
import random

import torch
from torch import nn

EXPECTED = "TARGET_NETWORK_FROZEN"

SIZE = 6
GOAL = (SIZE - 1, SIZE - 1)
MAX_T = 30
MOVES = [(-1, 0), (1, 0), (0, -1), (0, 1)]


def observe(pos):
    r, c = pos
    obs = torch.zeros(2 + 2 * SIZE)
    obs[0], obs[1] = r / (SIZE - 1), c / (SIZE - 1)
    obs[2 + r] = 1.0
    obs[2 + SIZE + c] = 1.0
    return obs


def move(pos, action):
    dr, dc = MOVES[action]
    new = (min(SIZE - 1, max(0, pos[0] + dr)), min(SIZE - 1, max(0, pos[1] + dc)))
    done = new == GOAL
    return new, (1.0 if done else -0.01), done


class DQNAgent:
    def __init__(self, *, fixed, rng, gamma=0.95, sync_every=40):
        self.q = nn.Sequential(nn.Linear(2 + 2 * SIZE, 64), nn.ReLU(),
                               nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
        self.target = copy.deepcopy(self.q)
        self.optimizer = torch.optim.RMSprop(self.q.parameters(), lr=5e-4)
        self.gamma, self.sync_every, self.updates = gamma, sync_every, 0
        self.fixed, self.rng, self.memory = fixed, rng, []

    def act(self, obs, epsilon):
        if self.rng.random() < epsilon:
            return self.rng.randrange(4)
        with torch.no_grad():
            return int(self.q(obs).argmax())

    def sync_target(self):
        if self.fixed:
            self.target.load_state_dict(self.q.state_dict())
        else:
            target = copy.deepcopy(self.q)      # bug: a local copy, self.target never changes
            del target

    def train_step(self):
        batch = self.rng.sample(self.memory, 64)
        s = torch.stack([b[0] for b in batch])
        a = torch.tensor([b[1] for b in batch])
        r = torch.tensor([b[2] for b in batch])
        s2 = torch.stack([b[3] for b in batch])
        done = torch.tensor([b[4] for b in batch])
        with torch.no_grad():
            y = r + self.gamma * (1 - done) * self.target(s2).max(1).values
        loss = nn.functional.mse_loss(self.q(s).gather(1, a[:, None]).squeeze(1), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.updates += 1
        if self.updates % self.sync_every == 0:
            self.sync_target()
        return loss


def free_cells():
    return [(r, c) for r in range(SIZE) for c in range(SIZE) if (r, c) != GOAL]


def success_rate(agent):
    wins = 0
    for pos in free_cells():
        for _ in range(MAX_T):
            pos, _, done = move(pos, agent.act(observe(pos), 0.0))
            if done:
                wins += 1
                break
    return wins / len(free_cells())


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    rng = random.Random(3)
    agent = DQNAgent(fixed=fixed, rng=rng)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(agent.q, optimizer=agent.optimizer)

    steps = 0
    while steps < 1500:
        pos = rng.choice(free_cells())
        for _ in range(MAX_T):
            steps += 1
            obs = observe(pos)
            action = agent.act(obs, max(0.1, 1.0 - steps / 800))
            pos, reward, done = move(pos, action)
            agent.memory.append((obs, action, reward, observe(pos), float(done)))
            if len(agent.memory) >= 128:
                loss = agent.train_step()
                if mon is not None:
                    mon.step(loss)
            if done:
                break

    metric = success_rate(agent)
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": metric, "higher_is_better": True}
