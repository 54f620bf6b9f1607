"""Healthy: a transformer token tagger taking an HF-style dict (``input_ids``,
``attention_mask``, pads id 0) that passes ``src_key_padding_mask=~attention_mask.bool()``,
positions from ``torch.arange(input_ids.shape[1])``, and one output per position."""
import torch
import torch.nn.functional as F
from torch import nn

from tests.blind.batch_probes._common import pad_right, seeded

PAD, VOCAB = 0, 30


class Tagger(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.pos = nn.Embedding(128, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(dim, 3)

    def forward(self, input_ids, attention_mask):
        h = self.tok(input_ids) + self.pos(torch.arange(input_ids.shape[1]))
        h = self.encoder(h, src_key_padding_mask=~attention_mask.bool())
        return self.out(h)


def build(fixed=True):
    torch.manual_seed(0)
    gen = seeded(92)
    seqs = [torch.randint(1, VOCAB, (int(torch.randint(3, 20, (1,), generator=gen)),),
                          generator=gen) for _ in range(96)]
    model = Tagger()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for s in range(0, 96, 16):
        ids, mask = pad_right(seqs[s:s + 16], PAD)
        tags = torch.where(mask.bool(), ids % 3, torch.full_like(ids, -100))
        logits = model(input_ids=ids, attention_mask=mask)
        loss = F.cross_entropy(logits.flatten(0, 1), tags.flatten(), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    ids, mask = pad_right(seqs[:12], PAD)
    return dict(model=model, inputs={"input_ids": ids, "attention_mask": mask},
                options=dict(pad_value=PAD))
