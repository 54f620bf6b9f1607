"""A 1-D CNN frame tagger on float feature sequences (dict inputs ``frames`` (B, T, 4) padded
with 0.0 and ``mask`` (B, T) bool); it normalises each sequence over time by hand with
``h.mean(1)`` / ``h.std(1)`` -- pads included -- where masked statistics were meant. A small
Trainer-free epoch loop over length-bucketed batches, RMSprop.
Bug real: per-frame accuracy (at the sequence's own frames) when each test sequence is tagged
in a batch that a 120-frame sequence joins (training sequences are 6..30 frames)."""
import copy
import functools

import torch
import torch.nn.functional as F
from torch import nn

from tests.blind.batch_probes._common import pad_right, seeded

EXPECTED = "PADDING_CHANGES_OUTPUT"


def make_seqs(n, gen):
    """A recording with its own gain and offset; a frame is 'active' when its energy channel is
    above the recording's own median level (so the model needs per-recording statistics)."""
    out = []
    for _ in range(n):
        length = int(torch.randint(6, 31, (1,), generator=gen))
        gain, offset = 0.5 + 2 * float(torch.rand(1, generator=gen)), float(
            torch.randn(1, generator=gen)) * 3
        active = torch.rand(length, generator=gen) < 0.5
        energy = active.float() + 0.15 * torch.randn(length, generator=gen)
        frames = torch.randn(length, 4, generator=gen) * 0.3
        frames[:, 0] = gain * energy + offset
        out.append((frames, active.long()))
    return out


def batchify(rows):
    frames, mask = pad_right([r[0] for r in rows], 0.0)
    tags, _ = pad_right([r[1] for r in rows], -100)
    return {"frames": frames, "mask": mask.bool()}, tags


class ConvTagger(nn.Module):
    def __init__(self, fixed, ch=16):
        super().__init__()
        self.fixed = fixed
        self.conv1 = nn.Conv1d(4, ch, 3, padding=1)
        self.conv2 = nn.Conv1d(ch, ch, 3, padding=1)
        self.out = nn.Linear(ch, 2)

    def forward(self, frames, mask):
        m = mask.unsqueeze(-1).to(frames.dtype)
        if self.fixed:
            n = m.sum(1, keepdim=True).clamp(min=1)
            mean = (frames * m).sum(1, keepdim=True) / n
            std = ((((frames - mean) * m) ** 2).sum(1, keepdim=True) / n).sqrt()
        else:
            mean, std = frames.mean(1, keepdim=True), frames.std(1, keepdim=True)
        h = ((frames - mean) / (std + 1e-5)) * m
        h = F.relu(self.conv1(h.transpose(1, 2)))
        h = F.relu(self.conv2(h)).transpose(1, 2)
        return self.out(h)                                 # (B, T, 2): one tag per frame


@functools.lru_cache(maxsize=None)
def _fit(fixed):
    torch.manual_seed(0)
    gen = seeded(81)
    data = sorted(make_seqs(1200, gen), key=lambda r: len(r[0]) + float(torch.rand(
        1, generator=gen)) * 8)                       # bucketed by length, with some spread
    batches = [data[s:s + 24] for s in range(0, len(data), 24)]
    model = ConvTagger(fixed)
    opt = torch.optim.RMSprop(model.parameters(), lr=3e-3)
    for _epoch in range(8):
        for b in torch.randperm(len(batches), generator=gen).tolist():
            inputs, tags = batchify(batches[b])
            loss = F.cross_entropy(model(**inputs).flatten(0, 1), tags.flatten(),
                                   ignore_index=-100)
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    return model, make_seqs(200, seeded(82))


def build(fixed):
    model, test = _fit(fixed)
    return dict(model=copy.deepcopy(model), inputs=batchify(test[:12])[0],
                options=dict(pad_value=0.0))


def _frame_acc(model, rows, neighbour=None):
    hit = total = 0
    with torch.no_grad():
        for r in rows:
            inputs, _ = batchify([r] if neighbour is None else [r, neighbour])
            pred = model(**inputs)[0, : len(r[1])].argmax(-1)
            hit, total = hit + int((pred == r[1]).sum()), total + len(r[1])
    return hit / total


def train(fixed):
    model, test = _fit(fixed)
    long_seq = make_seqs(1, seeded(83))[0]
    long_seq = (long_seq[0].repeat(12, 1)[:120], long_seq[1].repeat(12)[:120])
    single, joined = _frame_acc(model, test), _frame_acc(model, test, long_seq)
    return dict(metric=joined, higher_is_better=True,
                evidence=dict(with_long_neighbour_frame_acc=round(joined, 3),
                              single_frame_acc=round(single, 3)))
