"""Where a wrong gradient is born: the module that turns a right gradient into a wrong one.

The backward pass visits the points (module inputs and outputs) in the reverse of the order
the forward pass made them. Walking the checked points in forward order, the gradient is
born wrong between a wrong point and the next checked point that is right: in the innermost
module call whose span holds both. For ``'2' input`` (wrong) followed by ``'2' output``
(right) that is module ``2``, on its input path; for ``'1.fc2' output`` followed by ``'1'
output`` it is block ``1``'s own code between its sub-modules; when the model's output is
wrong and only the loss follows, it is the loss. Points that could not be checked are
passed over, which widens the span to the module holding both ends. A parameter whose
gradient is wrong while every output of its module is right is born wrong in that module, on
that parameter's path.
"""
from dataclasses import dataclass

from .points import INPUT

LOSS = "loss"
INTERNAL = "internal"


@dataclass(frozen=True)
class Birth:
    """A culprit: ``module`` (or "loss"), ``path`` ("input", "internal" or a parameter's
    short name), ``evidence`` (the wrong target that shows it: a point key or a parameter
    name), ``right`` (the right point next to it, or None), ``position`` in forward order."""

    module: str
    path: str
    evidence: object
    right: object
    position: int


def locate(points, point_status, parameter_status):
    """Births, in the order the backward pass meets them (nearest the loss first).

    ``points``: Points in forward order; ``point_status``: point key -> "ok", "mismatch" or
    anything else for unknown (a point no gradient reaches tells nothing about the flow and
    should be passed as unknown); ``parameter_status``: parameter name -> the same.
    """
    births = []
    known = [(position, p) for position, p in enumerate(points)
             if point_status.get(p.key) in ("ok", "mismatch")]
    for number, (position, point) in enumerate(known):
        if point_status[point.key] != "mismatch":
            continue
        right = next((p for _, p in known[number + 1:] if not _siblings(p, point)), None)
        if right is not None and point_status[right.key] != "ok":
            continue
        births.append(_birth_between(point, right, position))
    births.extend(_parameter_births(points, point_status, parameter_status))
    return sorted(births, key=lambda b: -b.position)


def _siblings(a, b):
    """Tensors of the same call's inputs (or outputs): made together, not one from the other."""
    return (a.module, a.call, a.kind) == (b.module, b.call, b.kind)


def _birth_between(wrong, right, position):
    """The birth between a wrong point and the next right one (None: only the loss follows)."""
    if right is None:
        if wrong.kind != INPUT and len(wrong.stack) == 1:
            return Birth(LOSS, INPUT, wrong.key, None, position)  # the model's output is wrong
        right_stack = wrong.stack[:1]   # the model's output is not known: somewhere after
    else:
        right_stack = right.stack
    common = 0
    while (common < min(len(wrong.stack), len(right_stack))
           and wrong.stack[common] == right_stack[common]):
        common += 1
    module = wrong.stack[common - 1][0]
    own_input = wrong.kind == INPUT and wrong.stack[-1] == wrong.stack[common - 1]
    return Birth(module, INPUT if own_input else INTERNAL, wrong.key,
                 None if right is None else right.key, position)


def _parameter_births(points, point_status, parameter_status):
    for name, status in parameter_status.items():
        if status != "mismatch":
            continue
        owner, _, short = name.rpartition(".")
        outputs = [(position, p) for position, p in enumerate(points)
                   if p.module == owner and p.kind != INPUT]
        if any(point_status.get(p.key) == "mismatch" for _, p in outputs):
            continue  # the gradient reaching the module is wrong already
        right = next((p.key for _, p in reversed(outputs) if point_status.get(p.key) == "ok"),
                     None)
        position = outputs[-1][0] if outputs else -1
        yield Birth(owner, short, name, right, position)
