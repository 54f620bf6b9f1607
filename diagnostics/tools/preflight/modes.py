"""The mode the user's ``train_step`` trains in, read at each of its forward passes with
gradients (TRAINING_IN_EVAL_MODE at ``train_step``).

A step that calls ``model.eval()`` (a validation inside it) and never ``model.train()``, or one
that never calls ``train()`` on a model left in eval mode by earlier code, trains without
dropout and with batch norm's running statistics frozen: the loss still falls, nothing raises.
The Monitor names the first when it sees the switch at a pass without gradients; a step that
is handed an eval-mode model from the start shows it no switch, so preflight reads the modes
itself while the training steps item runs the step: a call counts as trained in eval mode when
every forward pass of the model with gradients in it ran with the model and every
mode-dependent module (dropout with p > 0, batch norm, a recurrent net's or attention's own
dropout) in eval mode, the rule the Monitor's probe applies (a frozen batch norm in a model in
train mode, or a dropout left in train mode, is a choice, not this bug).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

from ...findings import Finding
from ...monitor.kinds import BATCHNORM, DROPOUT, changes_with_mode, module_kind

RECURRENT = "recurrent dropout"
ATTENTION = "attention dropout"
_WORDS = {DROPOUT: "dropout", BATCHNORM: "batch norm", RECURRENT: "the recurrent net's dropout",
          ATTENTION: "attention's dropout"}
_EFFECTS = {DROPOUT: "the model trains without dropout's regularisation",
            RECURRENT: "the recurrent layers train without their dropout",
            ATTENTION: "attention trains without its dropout",
            BATCHNORM: "batch norm normalises with its running statistics and stops updating "
                       "them"}


def mode_kind(module) -> str | None:
    """What changes with ``module``'s mode (a key of ``_WORDS``), or None: nothing does."""
    if changes_with_mode(module):
        return module_kind(module)
    dropout = getattr(module, "dropout", None)
    if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or dropout <= 0:
        return None
    names = {cls.__name__ for cls in type(module).__mro__}
    if "RNNBase" in names and getattr(module, "num_layers", 1) > 1:   # between its layers
        return RECURRENT
    if "MultiheadAttention" in names:
        return ATTENTION
    return None


def mode_modules(backend) -> list[tuple[str, object, str]]:
    """``(name, module, kind)`` of the model's modules whose output changes with the mode."""
    found = []
    for name, module in backend.named_modules():
        kind = mode_kind(module)
        if kind is not None:
            found.append((name, module, kind))
    return found


def mode_words(kinds) -> str:
    """``"dropout and batch norm"``: the kinds of mode-dependent modules, in words."""
    return " and ".join(_WORDS[kind] for kind in dict.fromkeys(kinds))


@dataclass(frozen=True)
class StepModes:
    """What the step's calls trained in: ``calls`` with a forward pass with gradients, the
    ``eval_calls`` among them whose every such pass ran in eval mode, the ``trailing`` ones in
    a row up to the last call, whether the first call trained in train mode, and the
    mode-dependent modules (``(name, kind)``)."""

    calls: int
    eval_calls: int
    trailing: int
    first_in_train: bool
    modules: tuple[tuple[str, str], ...]


class ModeRecorder:
    """Records, call by call of the user's step, the modes of the model's passes with
    gradients: ``with recorder.call(): train_step(...)``; ``recorder.modes()`` after."""

    def __init__(self, backend):
        self._backend = backend
        self._modules = mode_modules(backend)
        self._calls: list[set[str]] = []
        self._current: set[str] | None = None

    @contextlib.contextmanager
    def watching(self):
        """A forward pre-hook on the model while the block runs (none for a model without a
        mode-dependent module: its mode changes nothing), removed after, also on error."""
        if not self._modules:
            yield self
            return
        handle = self._backend.add_forward_pre_hook(self._backend.model, self._on_forward)
        try:
            yield self
        finally:
            handle.remove()

    @contextlib.contextmanager
    def call(self):
        self._current = set()
        try:
            yield
        finally:
            if self._current:
                self._calls.append(self._current)
            self._current = None

    def _on_forward(self, module, inputs):
        if self._current is None or not self._backend.grad_enabled():
            return None
        off = not module.training and not any(m.training for _, m, _ in self._modules)
        self._current.add("eval" if off else "train")
        return None

    def modes(self) -> StepModes:
        in_eval = [modes == {"eval"} for modes in self._calls]
        trailing = 0
        for flag in reversed(in_eval):
            if not flag:
                break
            trailing += 1
        return StepModes(calls=len(in_eval), eval_calls=sum(in_eval), trailing=trailing,
                         first_in_train=bool(in_eval) and not in_eval[0],
                         modules=tuple((name, kind) for name, _, kind in self._modules))


def eval_mode_finding(modes: StepModes) -> Finding | None:
    """TRAINING_IN_EVAL_MODE at ``train_step`` when its calls, from some call to the last one
    and at least half of them, trained with every mode-dependent module in eval mode."""
    if not modes.modules or modes.calls == 0 or 2 * modes.trailing < modes.calls:
        return None
    kinds = list(dict.fromkeys(kind for _, kind in modes.modules))
    off = mode_words(kinds)
    effect = "; ".join(_EFFECTS[kind] for kind in kinds)
    how = ("its first call trained in train mode and left the model in eval mode for the next "
           "(model.eval() inside it, e.g. for a validation, and no model.train() after)"
           if modes.first_in_train else
           "the model was in eval mode when train_step was called and train_step never calls "
           "model.train()")
    names = [name or "(model)" for name, _ in modes.modules]
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return Finding(
        "TRAINING_IN_EVAL_MODE", "warning", "train_step",
        f"train_step trains with the model in eval mode: in {modes.trailing} of its "
        f"{modes.calls} calls every forward pass with gradients ran with {off} off "
        f"({'module' if len(names) == 1 else 'modules'} {shown}); "
        f"{how}; {effect}",
        "call model.train() at the start of train_step (or right after the validation pass "
        "that calls model.eval())",
        {"calls": modes.calls, "eval_calls": modes.eval_calls, "trailing": modes.trailing,
         "first_call_in_train_mode": modes.first_in_train, "modules": names})
