"""The batch a batch-independence probe feeds the model: one tensor, a tuple/list of positional
inputs, or a dict of keyword inputs, with the examples on the first axis of every batched tensor.

The probes need to know which inputs carry the examples (they are permuted together, probed for
mixing, padded together) and which ride along unchanged (a shared table, a scalar, a flag): a
tensor is batched when its first axis has the batch size, which is read on ``input_ids`` (the
Hugging Face convention), else on the first tensor.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import require


@dataclass(frozen=True)
class BatchInputs:
    """``args`` (positional inputs) and ``kwargs`` (keyword inputs) of one model call;
    ``primary`` the slot the batch size is read on; ``rows`` the batch size."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    primary: Any = 0
    rows: int = 0

    def slots(self):
        """Every input's slot (a position, or a keyword), the primary first."""
        keys = list(range(len(self.args))) + list(self.kwargs)
        return [self.primary] + [k for k in keys if k != self.primary]

    def value(self, slot):
        return self.args[slot] if isinstance(slot, int) else self.kwargs[slot]

    def batched(self, torch):
        """The slots holding a tensor with the examples on its first axis, the primary first."""
        return [s for s in self.slots() if isinstance(self.value(s), torch.Tensor)
                and self.value(s).dim() >= 1 and self.value(s).shape[0] == self.rows]

    def replaced(self, values):
        """These inputs with the slots in ``values`` replaced."""
        args = tuple(values.get(i, a) for i, a in enumerate(self.args))
        kwargs = {k: values.get(k, v) for k, v in self.kwargs.items()}
        return BatchInputs(args, kwargs, self.primary, self.rows)

    def mapped(self, torch, change):
        """``change(tensor)`` applied to every tensor (the others as they are)."""
        return self.replaced({s: change(self.value(s)) for s in self.slots()
                              if isinstance(self.value(s), torch.Tensor)})

    def call(self, model):
        return model(*self.args, **self.kwargs)


def name(slot, batch=None):
    """How a message names an input: its keyword, its position, or "the input" (the model's
    one tensor)."""
    if batch is not None and not batch.kwargs and len(batch.args) == 1:
        return "the input"
    return f"'{slot}'" if isinstance(slot, str) else f"positional input {slot}"


def parse(torch, inputs) -> BatchInputs:
    """``inputs`` as the check takes them: a tensor (the model's one input), a tuple or list of
    positional inputs, or a dict of keyword inputs; a ``DiagnosticsError`` naming ``inputs``
    for anything else."""
    if isinstance(inputs, dict):
        tensors = [k for k, v in inputs.items() if isinstance(v, torch.Tensor)]
        require(bool(tensors), "inputs", "a torch.Tensor batch, or a dict of keyword inputs "
                "holding one", f"a dict without tensors ({sorted(map(str, inputs))})")
        require(all(isinstance(k, str) for k in inputs), "inputs",
                "a dict of keyword inputs (string keys)", f"keys {list(inputs)}")
        batch = BatchInputs((), dict(inputs), "input_ids" if "input_ids" in tensors
                            else tensors[0])
    elif isinstance(inputs, (tuple, list)):
        tensors = [i for i, v in enumerate(inputs) if isinstance(v, torch.Tensor)]
        require(bool(tensors), "inputs", "a torch.Tensor batch, or a tuple of positional "
                "inputs holding one", f"a {type(inputs).__name__} without tensors")
        batch = BatchInputs(tuple(inputs), {}, tensors[0])
    else:
        require(isinstance(inputs, torch.Tensor), "inputs", "a torch.Tensor batch",
                type(inputs).__name__)
        batch = BatchInputs((inputs,), {}, 0)
    first = batch.value(batch.primary)
    require(first.dim() >= 1 and first.shape[0] >= 2, "inputs",
            f"a batch of at least 2 examples on the first axis of {name(batch.primary)}",
            f"shape {tuple(first.shape)}")
    for slot in batch.slots():
        value = batch.value(slot)
        require(not (isinstance(value, torch.Tensor) and value.dtype.is_complex), "inputs",
                "floats, integer token ids or masks", f"{value.dtype} in {name(slot)}")
    return BatchInputs(batch.args, batch.kwargs, batch.primary, int(first.shape[0]))


def copied(torch, batch: BatchInputs, dtype) -> BatchInputs:
    """Detached copies for a model copy: floating tensors in float64 when ``dtype`` is set (the
    user's in-place code then changes neither the user's tensors nor their gradients)."""
    def copy(value):
        value = value.detach().clone()
        return value.to(torch.float64) if dtype is not None and value.is_floating_point() \
            else value
    return batch.mapped(torch, copy)
