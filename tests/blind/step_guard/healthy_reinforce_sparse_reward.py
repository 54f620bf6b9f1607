"""Healthy: REINFORCE on a corridor whose only reward is at the far end (sparse rewards).

Most batches of episodes earn nothing, so the policy gradient is small (only the baseline's
pull); a batch where an episode reaches the goal gives a gradient many times larger. That is the
signal, not a fault: the guard must not drop it and the Monitor must not call it a spike.
Idiom: a plain loop, 8 episodes per update, advantage = return - running-mean baseline, Adam.
"""
import torch
from torch import nn

from tests.blind.step_guard._common import execute

KIND = "healthy"
BAD_STEPS = frozenset()
HIGHER_IS_BETTER = True
BASELINE = 0.3            # success rate of the untrained policy is below this
LENGTH, HORIZON, EPISODES, UPDATES = 7, 12, 8, 120


def _rollout(policy, g):
    """One episode: (log-probabilities of the actions taken, return)."""
    state, logps = 0, []
    for _ in range(HORIZON):
        logits = policy(nn.functional.one_hot(torch.tensor(state), LENGTH).float())
        probs = torch.softmax(logits, -1)
        action = int(torch.multinomial(probs, 1, generator=g))
        logps.append(torch.log(probs[action]))
        state = max(0, min(LENGTH - 1, state + (1 if action == 1 else -1)))
        if state == LENGTH - 1:
            return torch.stack(logps), 1.0
    return torch.stack(logps), 0.0


def run(fixed=True, *, guard=None, guard_replay=False, **reference):
    torch.manual_seed(0)
    policy = nn.Sequential(nn.Linear(LENGTH, 32), nn.Tanh(), nn.Linear(32, 2))
    with torch.no_grad():
        policy[2].bias.copy_(torch.tensor([0.4, 0.0]))   # starts leaning left: rare successes
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(4)
    baseline = [0.0]

    def train(control):
        for _ in range(UPDATES):
            episodes = [_rollout(policy, g) for _ in range(EPISODES)]
            returns = torch.tensor([r for _, r in episodes])
            loss = -sum(((r - baseline[0]) * lp.sum()) for lp, r in episodes) / EPISODES
            baseline[0] = 0.9 * baseline[0] + 0.1 * float(returns.mean())
            optimizer.zero_grad()
            loss.backward()
            control.step(optimizer, loss)

    def evaluate():
        eg = torch.Generator().manual_seed(99)
        return sum(_rollout(policy, eg)[1] for _ in range(100)) / 100

    return execute(policy, optimizer, train, evaluate, guard=guard, guard_replay=guard_replay,
                   **reference)
