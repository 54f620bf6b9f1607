"""The facts earlier items found and later ones need, typed, and why any is missing.

``Facts`` is frozen: an item that learns something returns the new facts in its ``Outcome``
(``run.facts.found(...)``, ``run.facts.lacking(...)``) and the runner keeps them for the next
item. An item declares the facts it needs (``Item.needs``); one that is not known SKIPs the item
with the reason recorded when it went missing.
"""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from ...findings import Finding


class Fact(enum.Enum):
    """A fact an item can need, named as a skip reason names it (``no logits``)."""

    OUTPUT = "output"
    LOGITS = "logits"
    LOSS = "loss"
    OPTIMIZER = "optimizer"
    WATCHED = "watched"


@dataclass(frozen=True)
class Output:
    """The model's output on the batch (boxed: a model may return None)."""

    value: Any


@dataclass(frozen=True)
class Logits:
    """The tensor of the output read as logits, as an array, and where it is in the output
    (``diagnostics.outputs`` key)."""

    array: np.ndarray
    key: Any


@dataclass(frozen=True)
class Facts:
    """``output`` and ``logits`` (the forward item), ``loss`` at init (finite) and
    ``uninformative_loss`` (loss_fn on an all-zero output: the chance level), whether the
    optimizer holds the model's parameters (the parameters item), the Monitor's ``watched``
    findings over the training steps; ``missing``: the reason each unknown fact is unknown."""

    output: Output | None = None
    logits: Logits | None = None
    loss: float | None = None
    uninformative_loss: float | None = None
    optimizer_holds_model: bool = False
    watched: tuple[Finding, ...] | None = None
    missing: Mapping[Fact, str] = field(default_factory=lambda: MappingProxyType({}))

    def known(self, fact: Fact) -> bool:
        return {Fact.OUTPUT: self.output is not None, Fact.LOGITS: self.logits is not None,
                Fact.LOSS: self.loss is not None, Fact.OPTIMIZER: self.optimizer_holds_model,
                Fact.WATCHED: self.watched is not None}[fact]

    def why_unknown(self, fact: Fact) -> str:
        return self.missing.get(fact, f"no {fact.value}")

    def found(self, **facts) -> Facts:
        """These facts, now known."""
        return dataclasses.replace(self, **facts)

    def lacking(self, reasons: Mapping[Fact, str]) -> Facts:
        """The reasons these facts are unknown (kept until they are found)."""
        return dataclasses.replace(self, missing=MappingProxyType({**self.missing, **reasons}))
