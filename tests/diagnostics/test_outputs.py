"""The logits rule (``diagnostics.outputs``) and the class layouts (``diagnostics.layouts``)
over every container a model returns, drawn by hypothesis."""
from collections import OrderedDict, namedtuple
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import minigrad
from diagnostics.backends import get_backend
from diagnostics.layouts import class_axis
from diagnostics.outputs import entries, pick, replace, select_key

Pair = namedtuple("Pair", ["first", "second"])


@dataclass
class Holder:
    first: object
    second: object


CONTAINERS = {
    "tuple": lambda a, b: (a, b),
    "list": lambda a, b: [a, b],
    "dict": lambda a, b: {"first": a, "second": b},
    "ordered": lambda a, b: OrderedDict(first=a, second=b),
    "namedtuple": lambda a, b: Pair(a, b),
    "dataclass": lambda a, b: Holder(a, b),
}
FRAMEWORK_TENSOR = {"torch": torch.zeros, "minigrad": minigrad.zeros}
BACKENDS = {"torch": get_backend(torch.nn.Linear(1, 1)),
            "minigrad": get_backend(minigrad.nn.Linear(1, 1))}


@given(kind=st.sampled_from(sorted(CONTAINERS)), framework=st.sampled_from(sorted(BACKENDS)),
       position=st.integers(0, 1), rows=st.integers(1, 4))
def test_replace_puts_one_entry_and_keeps_the_rest(kind, framework, position, rows):
    make = FRAMEWORK_TENSOR[framework]
    first, second, new = make(rows, 2), make(rows, 3), make(rows, 5)
    output = CONTAINERS[kind](first, second)
    key = entries(output)[position][0]
    changed = replace(output, key, new)
    assert type(changed) is type(output)
    assert pick(changed, key) is new
    other = entries(output)[1 - position][0]
    assert pick(changed, other) is pick(output, other)
    assert pick(output, key) is (first, second)[position]      # the original is untouched
    # no entry named logits and no loss: the first floating entry (rule 5)
    assert select_key(BACKENDS[framework], output) == entries(output)[0][0]


@given(batch=st.integers(1, 5), middle=st.lists(st.integers(1, 4), max_size=2),
       classes=st.integers(2, 6))
def test_class_axis_recognises_both_layouts(batch, middle, classes):
    middle = tuple(middle)
    assert class_axis((batch, classes) + middle, (batch,) + middle) == 1
    # the sequence layout (B, ..., C): axis -1, unless the shape also reads as (B, C, ...)
    also_first = (middle + (classes,))[1:] == middle
    assert class_axis((batch,) + middle + (classes,), (batch,) + middle) == (
        1 if also_first else -1)
    assert class_axis((batch, classes) + middle, (batch, classes) + middle) is None


def test_logits_by_name_and_by_the_loss():
    backend = BACKENDS["torch"]
    features, logits = torch.zeros(4, 16), torch.zeros(4, 3)
    assert select_key(backend, {"features": features, "logits": logits}) == "logits"
    assert select_key(backend, (features, logits), reads=lambda: [1]) == 1
    assert select_key(backend, (features, torch.zeros(4, dtype=torch.long), logits),
                      reads=lambda: [2]) == 2
    assert select_key(backend, (features, logits), selector=1) == 1
    with pytest.raises(LookupError):
        select_key(backend, (np.zeros(3), "text"))
