"""DQN on a 6x6 grid world with pits, plain loop; the TD target comes from the online net.

Bug (kind 1, a target that carries gradient): there is no target network and the TD target
``r + gamma * q_net(s').max(1)[0]`` is computed by the trained network without ``no_grad``, so
the TD loss also moves Q(s') towards Q(s, a) (a residual-gradient step on a slippery grid),
and the values learnt are not those of the Bellman equation. Fix: compute the target under
``torch.no_grad()``.

Measured without gradhunt (seeded): mean discounted return of the greedy policy from every
start cell (deterministic roll-out) buggy 0.386 -> fixed 0.653.
"""
import torch
import torch.nn as nn

EXPECTED = "TARGET_CARRIES_GRADIENT"

SIZE = 6
GOAL = (5, 5)
PITS = {(1, 3), (2, 1), (3, 3), (4, 1), (4, 4), (1, 5)}
PIT_MAP = torch.zeros(SIZE, SIZE, dtype=torch.bool)
for _p in PITS:
    PIT_MAP[_p] = True
MOVES = torch.tensor([[-1, 0], [1, 0], [0, -1], [0, 1]])
GAMMA = 0.9
SLIP = 0.2


def _step(rc, a, gen):
    """One move of a batch of cells; with probability SLIP the move is a random one."""
    slip = torch.rand(len(a), generator=gen) < SLIP
    a = torch.where(slip, torch.randint(0, 4, (len(a),), generator=gen), a)
    nxt = (rc + MOVES[a]).clamp(0, SIZE - 1)
    goal = (nxt[:, 0] == GOAL[0]) & (nxt[:, 1] == GOAL[1])
    pit = PIT_MAP[nxt[:, 0], nxt[:, 1]]
    reward = goal.float() - pit.float() - 0.01
    return nxt, reward, (goal | pit).float()


def _obs(rc):
    return nn.functional.one_hot(rc[:, 0] * SIZE + rc[:, 1], SIZE * SIZE).float()


def _starts():
    cells = [(r, c) for r in range(SIZE) for c in range(SIZE)
             if (r, c) != GOAL and (r, c) not in PITS]
    return torch.tensor(cells)


@torch.no_grad()
def _greedy_return(q_net):
    rc = _starts()
    ret = torch.zeros(len(rc))
    alive = torch.ones(len(rc), dtype=torch.bool)
    for t in range(20):
        a = q_net(_obs(rc)).argmax(1)
        nxt = (rc + MOVES[a]).clamp(0, SIZE - 1)
        goal = (nxt[:, 0] == GOAL[0]) & (nxt[:, 1] == GOAL[1])
        pit = PIT_MAP[nxt[:, 0], nxt[:, 1]]
        ret += alive.float() * (GAMMA ** t) * (goal.float() - pit.float())
        alive &= ~(goal | pit)
        rc = nxt
    return ret.mean().item()


def run(*, fixed, monitor=False):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    q_net = nn.Sequential(nn.Linear(SIZE * SIZE, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 4))
    optimizer = torch.optim.Adam(q_net.parameters(), lr=1e-3)
    starts = _starts()
    mon = None
    if monitor:
        import gradhunt
        mon = gradhunt.Monitor(q_net, optimizer=optimizer)
    try:
        for step in range(1000):
            # uniform exploration over every cell and action: a replay buffer of fresh moves
            rc = starts[torch.randint(0, len(starts), (128,), generator=gen)]
            a = torch.randint(0, 4, (128,), generator=gen)
            nxt, reward, done = _step(rc, a, gen)
            q = q_net(_obs(rc)).gather(1, a[:, None]).squeeze(1)
            if fixed:
                with torch.no_grad():
                    target = reward + GAMMA * (1 - done) * q_net(_obs(nxt)).max(1)[0]
            else:
                target = reward + GAMMA * (1 - done) * q_net(_obs(nxt)).max(1)[0]
            loss = nn.functional.smooth_l1_loss(q, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(loss)
    finally:
        if mon is not None:
            mon.close()
    return {"report": mon.report() if mon is not None else None,
            "metric": _greedy_return(q_net), "higher_is_better": True}
