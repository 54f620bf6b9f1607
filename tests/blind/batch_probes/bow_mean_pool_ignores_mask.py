"""A bag-of-embeddings sentiment classifier taking an HF-style dict (``input_ids``,
``attention_mask``; the collate pads with id 0 to the longest review in the batch); it mean-pools
its token features with ``h.mean(1)`` -- over every position, pads included -- where the
masked mean ``(h * m).sum(1) / m.sum(1)`` was meant. A DataLoader with a padding collate_fn,
epochs, Adam. Reviews are 4..40 tokens in training; bug real: accuracy when each test review is
classified in a batch that a 320-token review joins (padded to 320)."""
import copy
import functools

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from tests.blind.batch_probes._common import pad_right, seeded

EXPECTED = "PADDING_CHANGES_OUTPUT"
PAD, VOCAB = 0, 60          # 1..9 positive words, 10..19 negative, 20..59 neutral


def make_reviews(n, gen):
    """Reviews of 4..40 tokens, each token positive, negative or neutral at random rates; the
    class is the net sentiment per token: negative below -0.15, positive above 0.15, neutral
    between (a fraction, so the pooled mean must be over the review's own tokens)."""
    out = []
    for _ in range(n):
        length = int(torch.randint(4, 41, (1,), generator=gen))
        p_pos, p_neg = (torch.rand(2, generator=gen) * 0.5).tolist()
        kind = torch.rand(length, generator=gen)
        ids = torch.randint(20, VOCAB, (length,), generator=gen)
        pos, neg = kind < p_pos, (kind >= p_pos) & (kind < p_pos + p_neg)
        ids[pos] = torch.randint(1, 10, (int(pos.sum()),), generator=gen)
        ids[neg] = torch.randint(10, 20, (int(neg.sum()),), generator=gen)
        net = (int(pos.sum()) - int(neg.sum())) / length
        out.append((ids, 0 if net < -0.15 else 2 if net > 0.15 else 1))
    return out


def collate(rows):
    ids, mask = pad_right([r[0] for r in rows], PAD)
    return {"input_ids": ids, "attention_mask": mask}, torch.tensor([r[1] for r in rows])


class BagClassifier(nn.Module):
    def __init__(self, fixed, dim=32):
        super().__init__()
        self.fixed = fixed
        self.emb = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.token_mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU())
        self.head = nn.Linear(dim, 3)

    def forward(self, input_ids, attention_mask):
        h = self.token_mlp(self.emb(input_ids))
        if self.fixed:
            m = attention_mask.unsqueeze(-1).to(h.dtype)
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1)
        else:
            pooled = h.mean(1)
        return self.head(pooled)


@functools.lru_cache(maxsize=None)
def _fit(fixed):
    torch.manual_seed(0)
    gen = seeded(61)
    loader = DataLoader(make_reviews(1500, gen), batch_size=32, shuffle=True, collate_fn=collate,
                        generator=torch.Generator().manual_seed(62))
    model = BagClassifier(fixed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _epoch in range(6):
        for batch, labels in loader:
            loss = F.cross_entropy(model(**batch), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    return model, make_reviews(300, seeded(63))


def build(fixed):
    model, test = _fit(fixed)
    batch, _labels = collate(test[:16])
    return dict(model=copy.deepcopy(model), inputs=batch, options=dict(pad_value=PAD))


def train(fixed):
    model, test = _fit(fixed)
    long_review = (torch.randint(20, VOCAB, (320,), generator=seeded(64)), 1)
    with torch.no_grad():
        single = [int(model(**collate([r])[0]).argmax(1)) == r[1] for r in test]
        joined = [int(model(**collate([r, long_review])[0])[0].argmax()) == r[1] for r in test]
        batched = torch.cat([model(**collate(test[s:s + 32])[0]).argmax(1)
                             for s in range(0, len(test), 32)])
    single_acc, joined_acc = sum(single) / len(single), sum(joined) / len(joined)
    batch_acc = (batched == torch.tensor([r[1] for r in test])).float().mean().item()
    return dict(metric=joined_acc, higher_is_better=True,
                evidence=dict(with_long_neighbour_acc=round(joined_acc, 3),
                              single_acc=round(single_acc, 3), batch32_acc=round(batch_acc, 3)))
