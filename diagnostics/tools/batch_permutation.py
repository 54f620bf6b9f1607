"""The permutation probe: the outputs of the batch permuted must be the outputs permuted.

An example's prediction must not depend on the row it sits in. A positional embedding looked up
with ``torch.arange(x.shape[0])`` (the batch size) where the sequence positions
``x.shape[1]`` were meant, a bias table shaped with the batch size and added per row: the model
trains (in an unshuffled loader row i is always the same kind of example, so the table even
learns a shortcut) and every shuffled or single-example prediction is another one. No gradient
shows it: example i's output depends on example i's input only, and on the index i.

Every batched input is permuted together (a derangement: every example changes row), on the
copy in eval mode, without a graph. When an example's output changes beyond float noise, a
second permutation keeps that example in its row and shuffles the others: if its output then
changes too, it depends on the other examples' values (mixing that the gradient probe could not
see: through an input without gradient, or a non-differentiable op) and is BATCH_MIXING;
otherwise it depends on its row: BATCH_POSITION_DEPENDENT.
"""
from __future__ import annotations

import numpy as np

from ..findings import Finding


def findings(outputs, batch, rng):
    """BATCH_POSITION_DEPENDENT (or BATCH_MIXING) on ``batch`` by ``outputs`` (the copy's
    forwards without a graph), or []."""
    torch = outputs.torch
    reference = outputs(batch)
    if reference.dim() < 1 or reference.shape[0] != batch.rows:
        return []
    order = derangement(rng, batch.rows)
    moved = outputs(permuted(torch, batch, order))
    if moved.shape != reference.shape:
        return []
    scale = float(reference.abs().max())
    changes = [outputs.change(reference[order[j]], moved[j], scale) for j in range(batch.rows)]
    row = int(np.argmax(changes))
    if changes[row] <= outputs.tolerance:
        return []
    example = int(order[row])          # the example that moved from row `example` to `row`
    evidence = {"example": example, "from_row": example, "to_row": row,
                "change": changes[row], "tolerance": outputs.tolerance}
    if batch.rows >= 3:
        others = [i for i in range(batch.rows) if i != example]
        shuffled = np.arange(batch.rows)
        shuffled[others] = np.asarray(others)[derangement(rng, len(others))]
        stays = outputs(permuted(torch, batch, shuffled))
        if stays.shape == reference.shape:
            kept = outputs.change(reference[example], stays[example], scale)
            if kept > outputs.tolerance:
                return [_mixing(example, kept, {**evidence, "change": kept})]
    caveat = (", while kept in its row with the others shuffled it does not change"
              if batch.rows >= 3 else "; with 2 examples a dependence on the other example "
              "cannot be told from one on the row: pass 3 or more")
    return [Finding(
        "BATCH_POSITION_DEPENDENT", "error", None,
        f"example {example}'s output depends on its row in the batch: moved from row "
        f"{example} to row {row} (the batch permuted, every batched input with it), its output "
        f"changed by {changes[row]:.2g} of the largest output (float noise is below "
        f"{outputs.tolerance:.2g}){caveat}; shuffled, re-batched or single-example inference "
        f"gives other predictions",
        "look for torch.arange(x.shape[0]) (the batch size) where the positions x.shape[1] "
        "were meant (a positional embedding written for the seq-first layout), or a "
        "parameter shaped with the batch size added per row (a bias per row where one per "
        "unit was meant)", evidence)]


def _mixing(example, change, evidence):
    return Finding(
        "BATCH_MIXING", "error", None,
        f"example {example}'s output depends on other examples of the batch: kept in its row "
        f"while the others are shuffled, its output changed by {change:.2g} of the largest "
        f"output; no input gradient shows it, so the mixing goes through an input without a "
        f"gradient (integer ids or a mask read without an embedding) or a non-differentiable "
        f"op (argmax, sort, indexing by values); predictions change with whatever else is in "
        f"the batch",
        "look for a reduction, sort or lookup over dim=0 (the batch) where a per-example axis "
        "was meant", evidence)


def derangement(rng, size):
    """A random permutation of ``size`` (>= 2) items that moves every one: one cycle through
    them in a random order."""
    cycle = rng.permutation(size)
    order = np.empty(size, dtype=np.int64)
    order[cycle] = np.roll(cycle, -1)
    return order


def permuted(torch, batch, order):
    """``batch`` with every batched input's rows taken in ``order``."""
    index = torch.as_tensor(order, dtype=torch.long)
    return batch.replaced({slot: batch.value(slot)[index] for slot in batch.batched(torch)})
