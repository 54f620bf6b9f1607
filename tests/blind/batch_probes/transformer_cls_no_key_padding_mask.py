"""A transformer-encoder classifier reading its [CLS] position, fed a raw (B, T) tensor of token
ids padded with id 0 to the longest sequence of the batch; it calls ``self.encoder(h)`` without
``src_key_padding_mask=(x == PAD)``, so [CLS] attends to the pads. A step loop drawing random
batches and padding them by hand, AdamW with a warm-up schedule.
Bug real: accuracy when each test sequence is classified in a batch that a 120-token sequence
joins (training sequences are 3..24 tokens, so training batches pad to about 24)."""
import copy
import functools

import torch
import torch.nn.functional as F
from torch import nn

from tests.blind.batch_probes._common import pad_right, seeded

EXPECTED = "PADDING_CHANGES_OUTPUT"
PAD, CLS, VOCAB = 0, 1, 16         # content tokens 2..15


def make_seqs(n, gen):
    """[CLS] + 2..23 content tokens; label: token 2 occurs more often than token 3."""
    out = []
    for _ in range(n):
        length = int(torch.randint(2, 24, (1,), generator=gen))
        body = torch.randint(2, VOCAB, (length,), generator=gen)
        body[torch.rand(length, generator=gen) < 0.3] = 2 + int(torch.randint(0, 2, (1,),
                                                                              generator=gen))
        label = int((body == 2).sum() > (body == 3).sum())
        out.append((torch.cat([torch.tensor([CLS]), body]), label))
    return out


def batchify(rows):
    ids, _mask = pad_right([r[0] for r in rows], PAD)
    return ids, torch.tensor([r[1] for r in rows])


class ClsTransformer(nn.Module):
    def __init__(self, fixed, dim=32, max_len=256):
        super().__init__()
        self.fixed = fixed
        self.tok = nn.Embedding(VOCAB, dim)
        self.pos = nn.Embedding(max_len, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(dim, 2)

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        if self.fixed:
            h = self.encoder(h, src_key_padding_mask=(x == PAD))
        else:
            h = self.encoder(h)
        return self.head(h[:, 0])


@functools.lru_cache(maxsize=None)
def _fit(fixed):
    torch.manual_seed(0)
    gen = seeded(71)
    data = make_seqs(2000, gen)
    model = ClsTransformer(fixed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50))
    for _step in range(400):
        idx = torch.randint(0, len(data), (32,), generator=gen).tolist()
        x, y = batchify([data[i] for i in idx])
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    return model, make_seqs(300, seeded(72))


def build(fixed):
    model, test = _fit(fixed)
    return dict(model=copy.deepcopy(model), inputs=batchify(test[:16])[0],
                options=dict(pad_value=PAD))


def train(fixed):
    model, test = _fit(fixed)
    long_seq = (torch.cat([torch.tensor([CLS]), torch.randint(4, VOCAB, (119,),
                                                              generator=seeded(73))]), 0)
    with torch.no_grad():
        single = [int(model(batchify([r])[0]).argmax(1)) == r[1] for r in test]
        joined = [int(model(batchify([r, long_seq])[0])[0].argmax()) == r[1] for r in test]
    single_acc, joined_acc = sum(single) / len(single), sum(joined) / len(joined)
    return dict(metric=joined_acc, higher_is_better=True,
                evidence=dict(with_long_neighbour_acc=round(joined_acc, 3),
                              single_acc=round(single_acc, 3)))
