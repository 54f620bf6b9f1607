"""``Case``: what a tool needs from one reproduction, the same for both corpora.

A planted bug's bench becomes a ``Case`` once the bug is in (``hunt.catalogue.bench_case``); a
real-world entry's factory builds one fresh in ``"torch"`` or ``"minigrad"`` (minigrad mirrors
torch's API, so a reproduction whose layers minigrad has is written once). ``tools.TOOLS``
hands it to the tool a bug or entry names.
"""
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

FRAMEWORKS = ("torch", "minigrad")


@dataclass(kw_only=True)
class Case:
    """What the tools need from a reproduction; fields a tool does not use stay None.

    ``train(after_step)`` runs the user's loop and calls ``after_step(loss)`` after every
    optimizer step (the Monitor's ``step``). ``scaler``: the loop's GradScaler, handed to
    the Monitor as a user with AMP does (``Monitor(scaler=...)``). ``inputs``/``targets``: one
    training batch (preflight, gradcheck, batch independence); ``gradcheck_rows``: how many of
    its rows gradcheck uses (all when None). ``data``: the keyword arguments of
    ``validate_data``. ``label_batches``: the labels of the batches in the order the loop
    trains on them."""

    model: Any = None
    loss_fn: Callable | None = None
    optimizer: Any = None
    train: Callable[[Callable], None] | None = None
    scaler: Any = None
    inputs: Any = None
    targets: Any = None
    gradcheck_rows: int | None = None
    causal: bool = False
    data: dict[str, Any] = field(default_factory=dict)
    label_batches: list | None = None


def framework_module(framework: str) -> ModuleType:
    """The ``torch`` or ``minigrad`` module, imported on first use."""
    if framework == "torch":
        import torch
        return torch
    if framework == "minigrad":
        import minigrad
        return minigrad
    raise ValueError(f"framework: expected one of {FRAMEWORKS}, got {framework!r}")
