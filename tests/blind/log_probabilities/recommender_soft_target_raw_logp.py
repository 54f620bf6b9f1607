"""Next-item recommender (user and item embeddings, dot-product scores over the catalogue), a
DataLoader with epochs, Adagrad, a hand-written label-smoothed loss.

Sessions over a catalogue of 60 items: the next item follows the last one through a
transition table that depends on the user's taste group (4 groups), the most likely next item
taking 70% of the mass. The model sums the user's embedding and the last item's embedding and
scores every item by a dot product with the item output embeddings. The loop writes label
smoothing by hand, ``-(logp * soft_targets).sum(1).mean()``, as many codebases do - but
``logp = model(users, items)`` is the raw dot-product scores, the ``log_softmax`` missing.
The loss is unbounded below: it goes negative and keeps falling while every score is pushed up
by its share of the smoothed target. Fix: ``logp = F.log_softmax(model(users, items), dim=1)``.

Metric: held-out hit rate at 1 against the most likely next item (higher is better). Measured
without gradhunt: see the folder docstring.
"""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "SCORES_AS_LOG_PROBABILITIES"

ITEMS = 60
USERS = 200
GROUPS = 4
DIM = 24
EPOCHS = 5
BATCH = 128
SMOOTHING = 0.1


class NextItem(nn.Module):
    def __init__(self):
        super().__init__()
        self.users = nn.Embedding(USERS, DIM)
        self.items_in = nn.Embedding(ITEMS, DIM)
        self.items_out = nn.Embedding(ITEMS, DIM)
        self.item_bias = nn.Parameter(torch.zeros(ITEMS))

    def forward(self, users, items):
        query = self.users(users) + self.items_in(items)
        return query @ self.items_out.weight.T + self.item_bias


def make_data(n, group_of, favourite, gen):
    users = torch.randint(0, USERS, (n,), generator=gen)
    last = torch.randint(0, ITEMS, (n,), generator=gen)
    best = favourite[group_of[users], last]
    random_next = torch.randint(0, ITEMS, (n,), generator=gen)
    keep = torch.rand(n, generator=gen) < 0.7
    return users, last, torch.where(keep, best, random_next), best


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(9)
    group_of = torch.randint(0, GROUPS, (USERS,), generator=gen)
    favourite = torch.randint(0, ITEMS, (GROUPS, ITEMS), generator=gen)
    users, last, nxt, _ = make_data(12000, group_of, favourite, gen)
    u_test, last_test, _, best_test = make_data(2000, group_of, favourite, gen)
    loader = DataLoader(TensorDataset(users, last, nxt), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(10))

    model = NextItem()
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.3)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer)

    for epoch in range(EPOCHS):
        model.train()
        for u, item, target in loader:
            soft = torch.full((len(target), ITEMS), SMOOTHING / ITEMS)
            soft.scatter_(1, target[:, None], 1 - SMOOTHING + SMOOTHING / ITEMS)
            if fixed:
                logp = F.log_softmax(model(u, item), dim=1)     # fix
            else:
                logp = model(u, item)                           # bug: raw scores as log-probs
            loss = -(logp * soft).sum(1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if mon is not None:
                mon.step(loss)

    model.eval()
    with torch.no_grad():
        hit_rate = (model(u_test, last_test).argmax(1) == best_test).float().mean().item()
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": hit_rate, "higher_is_better": True}
