"""The runner: ``preflight(...)`` runs the table's items in order, each after the facts it
needs, stamps each item's name on its outcome, and restores the model after each one."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from ...errors import require
from .. import _training as T
from .context import Run
from .facts import Fact
from .report import FAIL, CheckItem, Outcome, PreflightReport, first_line_of, skipped

MODEL_OR_LOSS = "the model's forward or backward, or loss_fn,"


@dataclass(frozen=True)
class Item:
    """One row of the checklist: ``check(run) -> Outcome`` runs when every fact in ``needs``
    is known; otherwise the item is SKIPped with the reason the missing fact gave.
    ``unknown_if_it_raises``: the facts this item would find, with the reason each stays
    unknown should it raise. ``raiser``: whose code raised when the check raises (None: your
    ``train_step`` when given, else the model or the loss). ``applies(run)``: whether the item
    belongs in this checklist at all."""

    name: str
    check: Callable[[Run], Outcome]
    needs: tuple[Fact, ...] = ()
    unknown_if_it_raises: Mapping[Fact, str] = field(default_factory=lambda: MappingProxyType({}))
    raiser: str | None = None
    applies: Callable[[Run], bool] | None = None


def preflight(model: Any, loss_fn: Callable, inputs: Any, targets: Any, *,
              optimizer: Any = None, train_step: Callable | None = None, output: Any = None,
              causal: bool = False, data: Any = None, test_data: Any = None,
              pad_value: Any = None) -> PreflightReport:
    """Run the pre-training checklist on one batch; returns a ``PreflightReport``.

    ``optimizer`` defaults to Adam(lr=3e-3). ``train_step(model, (inputs, targets), optimizer)``
    is your own training step, returning the loss; given, every item that trains (overfit one
    batch, the training steps) runs through it, so that its clipping counts and a missing
    ``zero_grad()`` or ``step()`` shows. ``inputs`` may be a dict of keyword inputs; the model
    may return a tuple, dict or dataclass, which ``loss_fn`` gets whole (``output=`` names the
    logits, see ``diagnostics.outputs``). An exception inside your model, loss or step fails
    its item, quoted. ``causal=True`` declares a model whose output at position t (second
    axis) may depend only on positions <= t (a language model): the batch independence item
    checks that too, and a "next-token targets" item reads from the loss's gradient which
    input token each position is scored against (t + 1, not t itself or t + 2). The model,
    the optimizer and the RNG states are restored afterwards; other side effects of
    ``train_step`` are not undone. ``data`` (and ``test_data``): your training Dataset or
    DataLoader (and the test one), read through their transforms by a "data pipeline" item
    (``validate_data``); given ``train_step``, a "step equivalence" item checks that it applies
    loss_fn's gradient on the batch (``check_step_equivalence``). ``pad_value``: the id or
    value your collate pads sequences with; the batch independence item then also pads the
    batch's sequence inputs and requires each example's output to stay the same
    (PADDING_CHANGES_OUTPUT, as ``check_batch_independence(..., pad_value=)``).
    """
    from .table import ITEMS

    require(isinstance(causal, bool), "causal", "True or False", repr(causal))
    backend, batch = T.checked_batch(model, loss_fn, inputs, targets, optimizer=optimizer,
                                     train_step=train_step, output=output, check_foreign=False)
    require(test_data is None or data is not None, "test_data", "to come with data",
            "test_data without data")
    require(pad_value is None or (isinstance(pad_value, (int, float))
                                  and not isinstance(pad_value, bool)), "pad_value",
            "None or a number (the id or value a collate pads sequences with)", repr(pad_value))
    run = Run(backend, batch, optimizer=optimizer, train_step=train_step, causal=causal,
              data=data, test_data=test_data, pad_value=pad_value)
    if optimizer is not None:
        run.keep_tensors(T.foreign_parameters(backend, optimizer))
    try:
        items = [run_item(run, item) for item in ITEMS
                 if item.applies is None or item.applies(run)]
    finally:
        run.restore()
    size = sum(int(np.prod(tuple(p.shape))) for _, p in backend.named_parameters())
    return PreflightReport(items=items, model=f"{backend.name} {type(model).__name__}, "
                                              f"{size:,} parameters")


def run_item(run: Run, item: Item) -> CheckItem:
    """``item`` on ``run``, named: SKIP for a missing fact, FAIL quoting an exception from the
    user's code; the facts it returns kept for the next items; the model restored after."""
    missing = [fact for fact in item.needs if not run.facts.known(fact)]
    if missing:
        return skipped(run.facts.why_unknown(missing[0])).named(item.name)
    run.facts = run.facts.lacking(item.unknown_if_it_raises)
    try:
        outcome = item.check(run)
    except Exception as error:  # the user's model, loss, backward or train_step: quote it
        return CheckItem(item.name, FAIL, f"{_raiser(run, item)} raised "
                                          f"{type(error).__name__}: {first_line_of(error)}")
    finally:
        run.restore()
    if outcome.facts is not None:
        run.facts = outcome.facts
    return outcome.named(item.name)


def _raiser(run: Run, item: Item) -> str:
    if item.raiser is not None:
        return item.raiser
    return "train_step" if run.train_step is not None else MODEL_OR_LOSS
