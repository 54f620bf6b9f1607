"""The padding probe: an example's output must not change when a longer neighbour makes the
batch longer.

A collate pads every sequence to the longest of its batch and hands over a mask. A model that
pools over every position (``h.mean(1)``), attends without a key padding mask, reads its
prediction at position -1, or normalises over time counting the pads, gives an example another
prediction whenever a longer example shares its batch: training batches of similar lengths hide
it, and served predictions depend on the neighbours.

The probe appends ``T`` positions to every sequence input (as many again as the batch has:
every example then has at least half of its positions padded, so a mean over time is halved,
half the keys an unmasked query sees are pads, and position -1 is a pad), and ``2T`` (see
``findings``); one and two positions where the model cannot take ``3T`` (a positional table
sized for the data). It appends ``pad_value`` to the inputs, the mask's "padding" value to a
mask (a ``(B, T)`` tensor of bools or 0/1), -100 (the ignore index every collate pads labels
with) to ``labels``. Each example's output (at its own positions, for an output per position)
must stay the same within float noise.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DiagnosticsError, require
from ..findings import Finding
from .batch_inputs import BatchInputs, name

LABELS_PAD = -100       # torch's and Hugging Face's ignore index


@dataclass(frozen=True)
class PadLayout:
    """How each sequence input of a batch is padded: ``steps`` (T, the positions axis, 1),
    ``fills`` (slot -> the value appended), ``masks`` (the slots read as masks, with the
    value that marks content), ``primary`` (the sequence input that tells padding),
    ``pad_value``."""

    steps: int
    fills: dict
    masks: dict
    primary: object
    pad_value: float


def layout(torch, batch: BatchInputs, pad_value) -> PadLayout:
    """The padding of ``batch``'s sequence inputs: tensors ``(B, T, ...)`` with the same T as
    the primary input's second axis (else the first batched tensor with one)."""
    batched = [s for s in batch.batched(torch) if batch.value(s).dim() >= 2]
    require(bool(batched), "pad_value", "inputs with a positions axis, shaped (batch, "
            "positions, ...), to pad", "no batched input with a second axis")
    primary = batch.primary if batch.primary in batched else batched[0]
    steps = int(batch.value(primary).shape[1])
    fills, masks = {}, {}
    for slot in batched:
        value = batch.value(slot)
        if value.shape[1] != steps:
            continue
        if slot == "labels":
            fills[slot] = LABELS_PAD
        elif slot != primary and value.dim() == 2 and _binary(torch, value):
            content = _content_value(torch, value)
            masks[slot] = content
            fills[slot] = bool(1 - content) if value.dtype == torch.bool else 1 - content
        else:
            fills[slot] = pad_value
    return PadLayout(steps, fills, masks, primary, pad_value)


def _binary(torch, value):
    return value.dtype == torch.bool or bool(((value == 0) | (value == 1)).all())


def _content_value(torch, mask):
    """What marks a real position: 1 for an attention mask (1s then 0s in every row), 0 for a
    key padding mask (0s then 1s in some row: ``True`` = padding, as ``src_key_padding_mask``
    takes it; also an all-False bool mask, a batch without pads in that convention)."""
    rows = mask.to(torch.int64)
    steps = rows[:, 1:] - rows[:, :-1]
    rising = bool((steps >= 0).all()) and bool((steps > 0).any())
    all_false = mask.dtype == torch.bool and not bool(mask.any())
    return 0 if rising or all_false else 1


def padded(torch, batch: BatchInputs, pads: PadLayout, extra: int) -> BatchInputs:
    """``batch`` with ``extra`` positions appended to every sequence input."""
    values = {}
    for slot, fill in pads.fills.items():
        value = batch.value(slot)
        shape = (value.shape[0], extra) + tuple(value.shape[2:])
        tail = torch.full(shape, fill, dtype=value.dtype, device=value.device) \
            if value.dtype != torch.bool else torch.full(shape, bool(fill), device=value.device)
        values[slot] = torch.cat([value, tail], dim=1)
    return batch.replaced(values)


def content(torch, batch: BatchInputs, pads: PadLayout):
    """``(B, T)`` bool: the positions of each example that are its own (not padding), by its
    mask, else by the trailing run of the pad value in the primary sequence input."""
    if pads.masks:
        slot, value = next(iter(pads.masks.items()))
        return batch.value(slot).to(torch.int64) == value
    value = batch.value(pads.primary)
    is_pad = (value == pads.pad_value).reshape(value.shape[0], value.shape[1], -1).all(dim=2)
    trailing = is_pad.flip(1).to(torch.int64).cumprod(dim=1).flip(1).bool()
    return ~trailing


def findings(outputs, batch: BatchInputs, pads: PadLayout):
    """``([PADDING_CHANGES_OUTPUT] or [], note)``: ``note`` says why padding was not judged.

    What must not change is an example's output with the number of pads after it. An example
    that has pads of its own in the batch is compared as given and with ``T`` more positions;
    one that fills the batch (the longest) with ``T`` and with ``2T`` more: its first pads may
    move its last positions through a stack of convolutions (each layer reads one pad's
    activation more at the edge, as zero padding would not), an edge effect the first ``T``
    pads take up. A readout that skips its pads by a mask is unchanged in both; a mean, an
    unmasked attention, a norm over time or a recurrent state run over the pads is not."""
    torch = outputs.torch
    reference = outputs(batch)
    if reference.dim() < 1 or reference.shape[0] != batch.rows:
        return [], "padding not judged: the output has no example axis"
    once = twice = error = None
    for extra in dict.fromkeys((pads.steps, 1)):
        try:
            once = outputs(padded(torch, batch, pads, extra))
            twice = outputs(padded(torch, batch, pads, 2 * extra))
            break
        except DiagnosticsError as raised:   # the user's forward on a longer batch
            once, error = None, raised
    if once is None:
        return [], f"padding not judged: on a batch two positions longer, {error}"
    steps = reference.shape[1] if reference.dim() >= 2 else None
    per_position = steps is not None and all(
        out.dim() == reference.dim() and out.shape[1] == steps + grow * extra
        and out.shape[2:] == reference.shape[2:] for out, grow in ((once, 1), (twice, 2)))
    if per_position:
        once, twice = once[:, :steps], twice[:, :steps]
    elif once.shape != reference.shape or twice.shape != reference.shape:
        return [], (f"padding not judged: the output's shape {tuple(reference.shape)} became "
                    f"{tuple(once.shape)} with {extra} more positions")
    own = content(torch, batch, pads)                    # (B, T): each example's positions
    has_pads = ~own.all(dim=1)
    keep = own if per_position and steps == pads.steps else torch.ones(
        reference.shape[:2] if per_position else reference.shape[:1], dtype=torch.bool)
    changes = []
    for i in range(batch.rows):
        before, after = (reference, once) if bool(has_pads[i]) else (once, twice)
        changes.append(_change(outputs, before[i], after[i], keep[i], before, keep))
    row = int(np.argmax(changes))
    if changes[row] <= outputs.tolerance:
        return [], ""
    start = pads.steps + (0 if bool(has_pads[row]) else extra)
    where = " at its own positions" if per_position else ""
    entries = ", ".join(f"{name(s, batch)} with {v!r}" for s, v in pads.fills.items())
    return [Finding(
        "PADDING_CHANGES_OUTPUT", "warning", None,
        f"example {row}'s output{where} changes when the batch is padded from {start} to "
        f"{start + extra} positions, as a longer neighbour would make it ({entries}): by "
        f"{changes[row]:.2g} of the largest output (float noise is below "
        f"{outputs.tolerance:.2g}); predictions depend on the longest example of the batch",
        "mask the padding wherever positions are combined: pool with the mask ((h * m).sum(1) "
        "/ m.sum(1)) instead of h.mean(1), pass a key padding mask to attention "
        "(src_key_padding_mask / attention_mask), read the last real position (lengths - 1) "
        "instead of -1, and take statistics over time on the real positions only",
        {"example": row, "change": changes[row], "tolerance": outputs.tolerance,
         "positions": start, "pads": extra, "per_position": per_position,
         "padded_inputs": {str(s): v for s, v in pads.fills.items()}})], ""


def _change(outputs, before, after, keep, reference, keep_all):
    """The change of one example's output at its kept positions, relative to the largest
    output of the batch at the kept positions."""
    scale = float(reference[keep_all].abs().max()) if bool(keep_all.any()) else 0.0
    if not bool(keep.any()):
        return 0.0
    return outputs.change(before[keep] if keep.dim() else before,
                          after[keep] if keep.dim() else after, scale)
