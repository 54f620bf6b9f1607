"""TRANSFORM_ONE_SIDED: tokens and their tags shuffled by two independent random permutations.

Model family: embedding + one Transformer encoder layer (self-attention, no positions: the tags
depend on each token and on which marker words the sentence holds, not on order) + linear tag
head; AdamW with a linear warm-up (LambdaLR); a loop over a fixed number of steps that cycles a
DataLoader. Idiom: a word-order augmentation in ``__getitem__``:
``tokens = tokens[torch.randperm(L)]`` and, on the next line, ``tags = tags[torch.randperm(L)]``:
two random calls where one permutation must serve both, so each tag lands on another token's
position. The fixed twin draws ``perm = torch.randperm(L)`` once and indexes both with it. Tuple
samples ``(tokens, tags)`` of integer tensors; the test split is not shuffled.

Measured (held-out per-token tag accuracy, higher is better): 0.62 (buggy) vs 1.00 (fixed).
"""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

EXPECTED = "TRANSFORM_ONE_SIDED"
VOCAB, L, N_TAGS = 48, 12, 6
MARKERS = (0, 1)               # token 0 or 1 in the sentence changes the other tokens' tags


class ShuffledTagging(Dataset):
    def __init__(self, tokens, tags, shuffle_words=False, one_permutation=True):
        self.tokens, self.tags = tokens, tags
        self.shuffle_words, self.one_permutation = shuffle_words, one_permutation

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, i):
        tokens, tags = self.tokens[i], self.tags[i]
        if self.shuffle_words:
            if self.one_permutation:
                perm = torch.randperm(L)
                tokens, tags = tokens[perm], tags[perm]
            else:
                tokens = tokens[torch.randperm(L)]
                tags = tags[torch.randperm(L)]          # BUG: a second, independent draw
        return tokens, tags


def _make(n, gen):
    tokens = torch.randint(2, VOCAB, (n, L), generator=gen)
    marker = torch.randint(0, 3, (n,), generator=gen)      # 0: none, 1: token 0, 2: token 1
    pos = torch.randint(0, L, (n,), generator=gen)
    rows = torch.arange(n)
    has = marker > 0
    tokens[rows[has], pos[has]] = marker[has] - 1
    group = tokens % 2                                      # each word's own class
    tags = group * 3 + marker.view(n, 1)                    # the word's class x the marker
    tags = torch.where(tokens < 2, tokens * 3 + 2, tags)    # the markers' own tags: 2 and 5
    return tokens, tags


def build(fixed: bool):
    gen = torch.Generator().manual_seed(0)
    train = ShuffledTagging(*_make(1500, gen), shuffle_words=True, one_permutation=fixed)
    test = ShuffledTagging(*_make(400, gen))
    return dict(train=train, test=test)


class AttentionTagger(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.enc = nn.TransformerEncoderLayer(d, nhead=4, dim_feedforward=64, dropout=0.0,
                                              batch_first=True)
        self.head = nn.Linear(d, N_TAGS)

    def forward(self, tokens):
        return self.head(self.enc(self.emb(tokens)))


def train(fixed: bool, steps=350):
    torch.manual_seed(0)
    data = build(fixed)
    loader = DataLoader(data["train"], batch_size=64, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(1))
    model = AttentionTagger()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50))
    batches = iter(loader)
    for _step in range(steps):
        try:
            tokens, tags = next(batches)
        except StopIteration:
            batches = iter(loader)
            tokens, tags = next(batches)
        loss = F.cross_entropy(model(tokens).reshape(-1, N_TAGS), tags.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    with torch.no_grad():
        tokens, tags = next(iter(DataLoader(data["test"], batch_size=len(data["test"]))))
        acc = (model(tokens).argmax(-1) == tags).float().mean().item()
    return dict(metric=acc, higher_is_better=True,
                evidence=f"held-out per-token tag accuracy {acc:.3f}")
