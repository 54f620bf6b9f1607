"""Helpers the batch-probe programs share: padding as a collate does, and the folder's own
measurement of how much an example's output moves with the rest of its batch."""
import torch


def pad_right(seqs, value, length=None):
    """Sequences (each (L, ...) ) padded at the end with ``value`` to the longest (or
    ``length``), as a collate does; returns (padded (B, T, ...), mask (B, T) long 0/1)."""
    length = length or max(len(s) for s in seqs)
    out = torch.full((len(seqs), length) + tuple(seqs[0].shape[1:]), value,
                     dtype=seqs[0].dtype)
    mask = torch.zeros(len(seqs), length, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = s
        mask[i, : len(s)] = 1
    return out, mask


def seeded(seed):
    """A torch generator for the program's made-up data (the global RNG seeds the model)."""
    return torch.Generator().manual_seed(seed)
