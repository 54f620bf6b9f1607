"""Actor-critic on the corridor: a shared body with a policy head and a value head.

Loss per episode: the policy surrogate ``-sum(log pi(a|s) * (G - V(s)))`` (the advantage is
detached) plus the critic's smooth-L1 to the returns. The surrogate's value, like REINFORCE's,
is not a loss that must fall; the metric is the episode return.
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical

try:
    from .corridor import Corridor
except ImportError:
    from corridor import Corridor


class ActorCritic(nn.Module):

    def __init__(self, cells=10, hidden=32):
        super().__init__()
        self.body = nn.Linear(cells, hidden)
        self.action_head = nn.Linear(hidden, 2)
        self.value_head = nn.Linear(hidden, 1)

    def forward(self, x):
        h = F.relu(self.body(x))
        return F.softmax(self.action_head(h), dim=-1), self.value_head(h)


def main(seed=0, episodes=300, gamma=0.9):
    torch.manual_seed(seed)
    env = Corridor(seed=seed)
    model = ActorCritic()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    returns_seen = []
    for _ in range(episodes):
        state, done = env.reset(), False
        saved, rewards = [], []
        while not done:
            probs, value = model(torch.from_numpy(state).unsqueeze(0))
            dist = Categorical(probs)
            action = dist.sample()
            saved.append((dist.log_prob(action), value.squeeze()))
            state, reward, done = env.step(action.item())
            rewards.append(reward)
        returns, running = [], 0.0
        for r in reversed(rewards):
            running = r + gamma * running
            returns.insert(0, running)
        returns = torch.tensor(returns)
        policy_losses, value_losses = [], []
        for (log_prob, value), ret in zip(saved, returns):
            advantage = ret - value.item()
            policy_losses.append(-log_prob * advantage)
            value_losses.append(F.smooth_l1_loss(value, ret))
        optimizer.zero_grad()
        loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
        loss.backward()
        optimizer.step()
        returns_seen.append(sum(rewards))
    return {"first_return": float(np.mean(returns_seen[:50])),
            "last_return": float(np.mean(returns_seen[-50:]))}


def healthy(metrics):
    return metrics["last_return"] > max(0.8, metrics["first_return"] + 0.2)


if __name__ == "__main__":
    print(main())
