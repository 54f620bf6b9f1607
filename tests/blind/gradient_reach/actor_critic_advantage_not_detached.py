"""Advantage actor-critic on a synthetic corridor, a Trainer class; the advantage is not detached.

An ActorCritic module (a shared LayerNorm body, a policy head and a value head) trained by one
RMSprop optimizer on 32 parallel copies of a corridor written here (reach the far end within
24 moves for a reward of 0.1; 5 actions, 2 of them no-ops).

Bug (kind 1, a target that carries gradient): the policy loss is
``-(log_prob * (returns - values)).mean()`` with ``values`` straight from the value head, so the
policy loss also trains the critic (and the shared body): it pushes V(s) up by the sampled
action's -log pi, the baseline drifts above the returns and every advantage turns negative.
Fix: ``advantage = (returns - values).detach()``.

Measured without gradhunt (seeded): mean discounted return of the greedy policy from every start
cell buggy 0.177 -> fixed 0.784 (the optimum).
"""
import torch
import torch.nn as nn

EXPECTED = "TARGET_CARRIES_GRADIENT"

LENGTH = 12
ACTIONS = torch.tensor([-1, 0, 0, 1, 1])      # left, two no-ops, right twice (a wide policy)
HORIZON = 24
GAMMA = 0.95
ENVS = 32
UPDATES = 60
REWARD = 0.1                   # a small reward: the drift of the baseline outweighs it


def _obs(pos):
    return nn.functional.one_hot(pos, LENGTH).float()


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(LENGTH, 64), nn.LayerNorm(64), nn.Tanh())
        self.policy = nn.Linear(64, len(ACTIONS))
        self.value = nn.Linear(64, 1)

    def forward(self, x):
        h = self.body(x)
        return self.policy(h), self.value(h).squeeze(-1)


class Trainer:
    def __init__(self, model, optimizer, *, fixed, gen):
        self.model, self.optimizer, self.fixed, self.gen = model, optimizer, fixed, gen

    def rollout(self):
        pos = torch.randint(0, LENGTH // 2, (ENVS,), generator=self.gen)
        alive = torch.ones(ENVS)
        log_probs, values, rewards, masks = [], [], [], []
        for _ in range(HORIZON):
            logits, value = self.model(_obs(pos))
            u = torch.rand(ENVS, 1, generator=self.gen)
            probs = logits.softmax(-1)
            action = (probs.cumsum(-1) < u).sum(-1).clamp(max=len(ACTIONS) - 1)
            log_probs.append(probs.log().gather(1, action[:, None]).squeeze(1))
            values.append(value)
            pos = (pos + ACTIONS[action]).clamp(0, LENGTH - 1)
            done = (pos == LENGTH - 1).float()
            rewards.append(REWARD * alive * done)
            masks.append(alive)
            alive = alive * (1 - done)
        returns, running = [], torch.zeros(ENVS)
        for r, m in zip(reversed(rewards), reversed(masks)):
            running = r + GAMMA * running * m
            returns.append(running)
        returns.reverse()
        return (torch.stack(log_probs), torch.stack(values), torch.stack(returns),
                torch.stack(masks))

    def train_step(self):
        log_probs, values, returns, masks = self.rollout()
        n = masks.sum()
        if self.fixed:
            advantage = (returns - values).detach()
        else:
            advantage = returns - values
        policy_loss = -(log_probs * advantage * masks).sum() / n
        value_loss = (((returns - values) ** 2) * masks).sum() / n
        entropy = -(log_probs * masks).sum() / n
        loss = policy_loss + 0.5 * value_loss - 0.01 * entropy
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        return loss

    @torch.no_grad()
    def greedy_return(self):
        pos = torch.arange(0, LENGTH - 1)
        ret = torch.zeros(len(pos))
        alive = torch.ones(len(pos))
        for t in range(HORIZON):
            logits, _ = self.model(_obs(pos))
            pos = (pos + ACTIONS[logits.argmax(-1)]).clamp(0, LENGTH - 1)
            done = (pos == LENGTH - 1).float()
            ret += alive * done * GAMMA ** t
            alive = alive * (1 - done)
        return ret.mean().item()


def run(*, fixed, monitor=False):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(2)
    model = ActorCritic()
    optimizer = torch.optim.RMSprop(model.parameters(), lr=3e-3)
    trainer = Trainer(model, optimizer, fixed=fixed, gen=gen)
    mon = None
    if monitor:
        import gradhunt
        mon = gradhunt.Monitor(model, optimizer=optimizer)
    try:
        for _ in range(UPDATES):
            loss = trainer.train_step()
            if mon is not None:
                mon.step(loss)
    finally:
        if mon is not None:
            mon.close()
    return {"report": mon.report() if mon is not None else None,
            "metric": trainer.greedy_return(), "higher_is_better": True}
