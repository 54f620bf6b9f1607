"""REINFORCE on the corridor: four episodes per optimizer step, their returns normalised.

The loss is the score-function surrogate ``-sum(log pi(a|s) * G)``: its gradient estimates the
return's, its value is no measure of progress (it hovers around 0 and swings with the batch's
returns). The program's own metric is the episode return.
"""
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

try:
    from .corridor import Corridor
except ImportError:
    from corridor import Corridor


class Policy(nn.Module):

    def __init__(self, cells=10, hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(cells, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def forward(self, x):
        return torch.softmax(self.body(x), dim=-1)


def run_episode(env, policy):
    """One episode under the current policy: the log-probabilities of its actions, its rewards."""
    state, done = env.reset(), False
    log_probs, rewards = [], []
    while not done:
        dist = Categorical(policy(torch.from_numpy(state).unsqueeze(0)))
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        state, reward, done = env.step(action.item())
        rewards.append(reward)
    return log_probs, rewards


def discounted(rewards, gamma):
    returns, running = [], 0.0
    for r in reversed(rewards):
        running = r + gamma * running
        returns.insert(0, running)
    return returns


def main(seed=0, updates=80, episodes_per_update=4, gamma=0.9):
    torch.manual_seed(seed)
    env = Corridor(seed=seed)
    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    returns_seen = []
    for _ in range(updates):
        log_probs, returns = [], []
        for _ in range(episodes_per_update):
            episode_log_probs, rewards = run_episode(env, policy)
            log_probs += episode_log_probs
            returns += discounted(rewards, gamma)
            returns_seen.append(sum(rewards))
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + 1e-6)
        loss = torch.cat([-lp * g for lp, g in zip(log_probs, returns)]).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    k = 15 * episodes_per_update
    return {"first_return": float(np.mean(returns_seen[:k])),
            "last_return": float(np.mean(returns_seen[-k:]))}


def healthy(metrics):
    return metrics["last_return"] > max(0.8, metrics["first_return"] + 0.2)


if __name__ == "__main__":
    print(main())
